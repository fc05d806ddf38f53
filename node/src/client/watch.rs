//! The `strand.v1.Events` service: pages of a namespace's event log, and watch streams.
//!
//! Invariant: a watch stream sends each event once, in sequence order, is judged by its token at
//! every read of the log (at least every [`WATCH_POLL_MS`], so it ends within about that long of
//! the token's revocation), and holds at most
//! [`WATCH_BUFFER_EVENTS_MAX`] events its client has not taken yet; a node serves at most
//! [`WATCH_STREAMS_MAX`] watch streams at once.

use std::sync::Arc;
use std::time::Duration;

use api::command::Query;
use api::commands::RegisteredRead;
use api::commands::events::Events as EventsQuery;
use api::convert::{IntoRead, refusal_to_status};
use api::model::Namespace;
use api::outcome::{Answer, Outcome};
use api::proto::events_server::Events;
use api::proto::{self as pb};
use raft_store::Disk;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::{EventsService, serve, unavailable};
use crate::core::{NodeCore, WATCH_STREAMS_MAX};

/// Events one watch stream may have queued for its client before it waits for the client.
pub const WATCH_BUFFER_EVENTS_MAX: usize = 1024;
/// How long a watch waits for an applied entry before it reads the log again anyway (a fallback:
/// it normally wakes on the applied index).
pub const WATCH_POLL_MS: u64 = 1000;

#[tonic::async_trait]
impl<D: Disk> Events for EventsService<D> {
    async fn list(&self, request: Request<pb::EventsRequest>) -> Result<Response<pb::EventsResponse>, Status> {
        serve(&self.leader, request).await
    }

    type WatchStream = ReceiverStream<Result<pb::Event, Status>>;

    /// Waits for the read barrier once (through the read path, which serves the first batch),
    /// then streams from this node's replica as it applies entries.
    async fn watch(&self, request: Request<pb::WatchRequest>) -> Result<Response<Self::WatchStream>, Status> {
        let core = self.leader.core();
        let permit = core.watch_streams.clone().try_acquire_owned().map_err(|_| {
            Status::resource_exhausted(format!(
                "this node already serves {WATCH_STREAMS_MAX} watch streams; close some, or watch through another node"
            ))
        })?;
        super::refuse_if_removed(core)?;
        let now = core.clock.now();
        let credential = super::credential_of(request.metadata())?;
        let mut read = request.into_inner().into_read(now).map_err(refusal_to_status)?;
        read.credential = credential;
        let Query::Registered(RegisteredRead::Events(EventsQuery { after, types, limit })) = read.query.clone() else {
            unreachable!("a watch request converts to an events query")
        };
        // Subscribed before the first read, so that a batch applied after this line wakes the feed
        // even if the read already saw it (the feed then reads once more, for nothing).
        let changes = core.state_machine.namespace_changes(&read.namespace);
        let first = self.leader.read(read.clone()).await.map_err(unavailable)?.map_err(refusal_to_status)?;
        let (sender, receiver) = mpsc::channel(WATCH_BUFFER_EVENTS_MAX);
        let feed = EventFeed {
            core: core.clone(),
            namespace: read.namespace,
            must_exist: read.namespace_must_exist,
            types,
            limit,
            cursor: after,
            changes,
            credential,
        };
        tokio::spawn(async move {
            feed.run(first, sender).await;
            drop(permit);
        });
        Ok(Response::new(ReceiverStream::new(receiver)))
    }
}

/// Where a watch stream's events go.
type EventSender = mpsc::Sender<Result<pb::Event, Status>>;

/// The producer of one watch stream: where it is in the namespace's event log, and how it learns
/// that the namespace changed.
struct EventFeed<D: Disk> {
    core: Arc<NodeCore<D>>,
    namespace: Namespace,
    /// Whether the stream ends, refused, once the namespace no longer exists.
    must_exist: bool,
    types: Vec<String>,
    /// Events per read.
    limit: u32,
    /// Every event up to this sequence number was sent, or filtered out by `types`.
    cursor: u64,
    /// Changes after each applied batch that touched the namespace's event log; marked seen
    /// just before each read of the log.
    changes: tokio::sync::watch::Receiver<()>,
    /// The stream's token, judged again at every read: the stream ends once it is revoked.
    credential: Option<api::auth::TokenHash>,
}

impl<D: Disk> EventFeed<D> {
    /// Feeds the stream until its client goes away, the node shuts down, or the log refuses the
    /// cursor (compacted); dropping the sender then ends the stream.
    async fn run(mut self, first: Outcome, sender: EventSender) {
        let core = self.core.clone();
        tokio::select! {
            () = core.stopped() => tracing::debug!(namespace = %self.namespace, "watch ended: the node is shutting down"),
            () = sender.closed() => {}
            () = self.follow(first, &sender) => {}
        }
    }

    async fn follow(&mut self, first: Outcome, sender: &EventSender) {
        let mut answer: Answer = Ok(first);
        loop {
            let (events, last_seq) = match answer {
                Ok(Outcome::Events { events, last_seq }) => (events, last_seq),
                Ok(other) => {
                    let _ = sender.send(Err(Status::internal(format!("events read answered {other:?}")))).await;
                    return;
                }
                Err(refusal) => {
                    let _ = sender.send(Err(refusal_to_status(refusal))).await;
                    return;
                }
            };
            let full = events.len() >= self.limit as usize;
            for event in &events {
                assert!(event.seq > self.cursor, "the event log answered seq {} at cursor {}", event.seq, self.cursor);
                if sender.send(Ok(pb::Event::from(event))).await.is_err() {
                    return;
                }
                self.cursor = event.seq;
            }
            if !full {
                // Every event up to `last_seq` was sent or filtered out: skip past the filtered.
                self.cursor = self.cursor.max(last_seq);
                self.wait_for_apply().await;
            }
            self.changes.borrow_and_update();
            let query = Query::from(EventsQuery { after: self.cursor, types: self.types.clone(), limit: self.limit });
            answer = self.core.read_as(self.credential.as_ref(), &self.namespace, self.must_exist, &query);
        }
    }

    /// Returns once the namespace changed after the latest read, or after [`WATCH_POLL_MS`].
    async fn wait_for_apply(&mut self) {
        let poll = tokio::time::sleep(Duration::from_millis(WATCH_POLL_MS));
        tokio::select! {
            () = poll => {}
            changed = self.changes.changed() => {
                if changed.is_err() {
                    // The state machine is gone; the shutdown signal ends the feed.
                    std::future::pending::<()>().await;
                }
            }
        }
    }
}
