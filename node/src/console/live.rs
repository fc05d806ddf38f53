//! `/ui/api/ns/NS/watch?after=N`: a namespace's events as this node applies them, in the
//! server-sent events format, read by the page with a streaming `fetch` (an `EventSource` cannot
//! send the token in a header, and the token never goes in a URL). Each event of the log is a
//! `data:` line of JSON; every [`NODE_BEAT_MS`] an `event: node` line tells which leader this
//! node follows, so a page sees leadership move and a silent feed is told from a dead one; a
//! refusal (a revoked token, a compacted cursor) is an `event: error` line, and the feed ends.
//!
//! Invariant: the feed is the Events service's own watch stream (its limits, its token checks);
//! it ends when its reader goes away or the node stops.

use std::time::Duration;

use api::proto as pb;
use api::proto::events_server::Events as _;
use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use raft_store::Disk;
use tokio::sync::mpsc;
use tokio_stream::StreamExt as _;

use super::data::http_status;
use super::{Console, error};

/// How often the feed says which leader this node follows.
pub const NODE_BEAT_MS: u64 = 2000;

/// One message of the feed, in the server-sent events format.
fn message(kind: Option<&str>, data: &serde_json::Value) -> String {
    match kind {
        Some(kind) => format!("event: {kind}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// Starts the feed of `namespace` after event `after` (default 0).
pub async fn watch<D: Disk>(
    console: &Console<D>,
    headers: &HeaderMap,
    namespace: &str,
    after: Option<String>,
) -> Response {
    let after = match after.as_deref().unwrap_or("0").parse::<u64>() {
        Ok(after) => after,
        Err(_) => return error(StatusCode::BAD_REQUEST, "after must be a sequence number, 0 or more".into()),
    };
    let header = pb::ReadHeader { namespace: namespace.to_string(), namespace_must_exist: true, ..Default::default() };
    let request = super::grpc_request(headers, pb::WatchRequest { header: Some(header), after, types: Vec::new() });
    let mut stream = match console.events.watch(request).await {
        Ok(stream) => stream.into_inner(),
        Err(status) => return error(http_status(status.code()), status.message().to_string()),
    };
    let core = console.leader.core().clone();
    let (sender, receiver) = mpsc::channel::<Result<String, std::io::Error>>(64);
    tokio::spawn(async move {
        let mut beat = tokio::time::interval(Duration::from_millis(NODE_BEAT_MS));
        loop {
            let next = tokio::select! {
                () = core.stopped() => break,
                () = sender.closed() => break,
                _ = beat.tick() => message(Some("node"), &serde_json::json!({ "id": core.id, "leader_id": core.leader() })),
                event = stream.next() => match event {
                    // The event's JSON as the events page reads it (`api::model::Event`).
                    Some(Ok(event)) => message(None, &serde_json::json!(api::convert::event_from_proto(event))),
                    Some(Err(status)) => {
                        let refused = message(Some("error"), &serde_json::json!({ "error": status.message() }));
                        let _ = sender.send(Ok(refused)).await;
                        break;
                    }
                    None => break,
                },
            };
            if sender.send(Ok(next)).await.is_err() {
                break;
            }
        }
    });
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(receiver)),
    )
        .into_response()
}
