//! A did:web host: serves one DID document at `/.well-known/did.json` on a
//! loopback port, for identities that are not did:plc (the reference's
//! bidders sign as `did:web:<their host>`).

use std::sync::Arc;

use atproto::DidDocument;
use axum::routing::get;
use axum::{Json, Router};
use parking_lot::RwLock;

/// The document a did:web host serves (replaceable, to rotate keys).
#[derive(Debug, Clone)]
pub struct DidWeb {
    document: Arc<RwLock<DidDocument>>,
}

impl DidWeb {
    /// A host serving `document`.
    #[must_use]
    pub fn new(document: DidDocument) -> Self {
        Self {
            document: Arc::new(RwLock::new(document)),
        }
    }

    /// The did:web of a host on `localhost:<port>`, as atproto spells it.
    #[must_use]
    pub fn did_for_port(port: u16) -> String {
        format!("did:web:localhost%3A{port}")
    }

    /// Replaces the served document.
    pub fn set(&self, document: DidDocument) {
        *self.document.write() = document;
    }

    /// The routes.
    pub fn router(&self) -> Router {
        let document = Arc::clone(&self.document);
        Router::new().route(
            "/.well-known/did.json",
            get(move || {
                let document = document.read().clone();
                async move { Json(document) }
            }),
        )
    }
}
