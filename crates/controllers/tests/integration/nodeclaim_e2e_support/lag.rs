//! A client whose watches of one resource deliver every event late: the
//! stale cache a controller meets on a loaded machine (its own status write
//! not yet seen while other kinds' events already arrived), made
//! deterministic so a test can rely on it.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::Request;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, StreamBody};
use kube::Client;
use kube::client::Body;
use tokio::time::Instant;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Lagged = UnsyncBoxBody<Bytes, BoxError>;

/// A client that sends everything through `inner`, except that each chunk of
/// a watch of `plural` (e.g. `nodeclaims`) reaches the caller `lag` after it
/// arrived. Lists and writes are not delayed, and the order is kept.
pub fn lagging_watches(inner: Client, plural: &'static str, lag: Duration) -> Client {
    let service = tower::service_fn(move |request: Request<Body>| {
        let inner = inner.clone();
        async move {
            let lagged = is_watch_of(&request, plural);
            let response = inner.send(request).await?;
            Ok::<_, kube::Error>(if lagged {
                response.map(|body| delayed(body, lag))
            } else {
                response.map(|body| body.map_err(BoxError::from).boxed_unsync())
            })
        }
    });
    Client::new(service, "default")
}

fn is_watch_of(request: &Request<Body>, plural: &str) -> bool {
    let uri = request.uri();
    uri.path().ends_with(&format!("/{plural}"))
        && uri.query().is_some_and(|q| q.contains("watch=true"))
}

/// `body` with every frame held back until `lag` after it arrived.
fn delayed(mut body: Body, lag: Duration) -> Lagged {
    let (frames, mut arrived) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(BoxError::from);
            if frames.send((Instant::now(), frame)).is_err() {
                return;
            }
        }
    });
    let stream = futures::stream::poll_fn(move |cx| arrived.poll_recv(cx)).then(
        move |(at, frame)| async move {
            tokio::time::sleep_until(at + lag).await;
            frame
        },
    );
    StreamBody::new(stream).boxed_unsync()
}
