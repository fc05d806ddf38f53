//! Bounds on the node's inbound connections: a stream adapter over the accepted connections
//! ([`limit`]) that [`crate::run`] puts in front of the gRPC server, so the real listener and the
//! simulator's pass through the same code.
//!
//! A connection is *pending* from its acceptance until it has sent [`HANDSHAKE_BYTES`] (the
//! HTTP/2 client preface; an HTTP/1.1 request for the metrics page is longer), then
//! *established*. Pending connections cost the node a file descriptor and a task while proving
//! nothing, so they are kept on a short leash:
//!
//! - at most [`ConnectionLimits::pending_allowed`] are pending at once, and at most
//!   `connections_max` connections are open; a new connection that would exceed either closes
//!   the oldest pending one to make room. A flood of idle connections therefore only ever
//!   displaces itself: clients and peers that send their handshake at once become established
//!   and keep their slots. Only when every slot holds an established connection is a new one
//!   closed on arrival;
//! - a pending connection is closed when its handshake timeout passes;
//! - an established connection with no traffic either way for the idle timeout is closed (after
//!   between one and two idle timeouts). gRPC clients reconnect; a live peer channel carries
//!   heartbeats or HTTP/2 pings, which count as traffic.
//!
//! A failing `accept` (most often the open-files limit) closes the oldest pending connection,
//! which frees a descriptor, and pauses accepting with a growing backoff instead of spinning.
//!
//! Invariant: at most `connections_max` admitted connections are counted open and at most
//! `pending_allowed` pending; a closed or evicted connection gives its slot back exactly once.
//! Invariant: the queue of pending connections holds at most `2 * pending_allowed + 1` entries.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::AtomicWaker;
use futures::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};
use tonic::transport::server::Connected;

use crate::config::ConnectionLimits;
use crate::metrics::{CloseReason, ConnectionMetrics};

/// Bytes a connection must send before it counts as established: the length of the HTTP/2
/// client preface, which every gRPC client sends before anything else.
pub const HANDSHAKE_BYTES: usize = 24;
/// Connections the peer listener keeps open at most (members dial a few channels each); the
/// client listener has `connections_max`.
pub const PEER_CONNECTIONS_MAX: u64 = 64;
/// File descriptors a node keeps for other things than the client listener's connections:
/// RocksDB's table files ([`raft_store::rocks::TABLE_FILES_OPEN_MAX`]) and its WAL, manifest and
/// info log, snapshot files, the peer listener's connections, outbound peer channels, stdio and
/// the runtime's own.
pub const DESCRIPTORS_RESERVED: u64 = raft_store::rocks::TABLE_FILES_OPEN_MAX as u64 + 128 + PEER_CONNECTIONS_MAX;

/// The peer listener's limits: the configured ones, with at most [`PEER_CONNECTIONS_MAX`]
/// connections.
pub fn peer_limits(limits: &ConnectionLimits) -> ConnectionLimits {
    ConnectionLimits { connections_max: limits.connections_max.min(PEER_CONNECTIONS_MAX), ..limits.clone() }
}
/// Below this open-files limit `strand node` warns at start.
pub const OPEN_FILES_RECOMMENDED_MIN: u64 = 4096;
/// First pause after a failed `accept`; it doubles with each further failure.
pub const ACCEPT_PAUSE_MS_MIN: u64 = 5;
/// Longest pause after failed `accept`s.
pub const ACCEPT_PAUSE_MS_MAX: u64 = 1_000;
/// At most one warning about the limits (refused or evicted connections, failed accepts) per
/// this interval; the counters on the metrics page have every one.
pub const WARNING_INTERVAL_MS: u64 = 10_000;

const _: () = assert!(ACCEPT_PAUSE_MS_MIN <= ACCEPT_PAUSE_MS_MAX);
const _: () = assert!(DESCRIPTORS_RESERVED < OPEN_FILES_RECOMMENDED_MIN);

/// The connection limits that fit under an open-files limit of `open_files`: `connections_max`
/// is lowered so that the connections and [`DESCRIPTORS_RESERVED`] fit, but never below
/// [`crate::config::CONNECTIONS_MIN`]. Answers the limits and whether they were lowered.
pub fn fit_to_open_files(limits: &ConnectionLimits, open_files: u64) -> (ConnectionLimits, bool) {
    let room = open_files.saturating_sub(DESCRIPTORS_RESERVED).max(crate::config::CONNECTIONS_MIN);
    let fitted = ConnectionLimits { connections_max: limits.connections_max.min(room), ..limits.clone() };
    let lowered = fitted.connections_max < limits.connections_max;
    (fitted, lowered)
}

/// Wraps the accepted connections of `incoming` in the limits (see the module header). The
/// returned stream yields no errors: a failed accept is logged and paused on.
pub fn limit<S, IO, IE>(
    incoming: S,
    limits: &ConnectionLimits,
    metrics: ConnectionMetrics,
) -> impl Stream<Item = Result<LimitedConnection<IO>, IE>> + Send + 'static
where
    S: Stream<Item = Result<IO, IE>> + Send + 'static,
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    IE: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    let limiter = Arc::new(Limiter::new(limits, metrics));
    let state = (Box::pin(incoming), limiter, Duration::ZERO);
    futures::stream::unfold(state, |(mut incoming, limiter, mut pause)| async move {
        loop {
            match incoming.next().await? {
                Ok(io) => {
                    pause = Duration::ZERO;
                    if let Some(connection) = limiter.admit(io) {
                        return Some((Ok(connection), (incoming, limiter, pause)));
                    }
                }
                Err(error) => {
                    pause = (pause * 2)
                        .clamp(Duration::from_millis(ACCEPT_PAUSE_MS_MIN), Duration::from_millis(ACCEPT_PAUSE_MS_MAX));
                    let error: Box<dyn std::error::Error + Send + Sync> = error.into();
                    limiter.accept_failed(&*error, pause);
                    tokio::time::sleep(pause).await;
                }
            }
        }
    })
}

/// Where a connection stands; kept in [`Slot::state`].
const PENDING: u8 = 0;
const ESTABLISHED: u8 = 1;
/// Closed by the limiter to make room; its slot is already given back.
const EVICTED: u8 = 2;
/// Dropped; its slot is given back.
const CLOSED: u8 = 3;

/// One admitted connection's place in the limiter.
#[derive(Debug, Default)]
struct Slot {
    /// [`PENDING`], [`ESTABLISHED`], [`EVICTED`] or [`CLOSED`]; changed only under the
    /// registry's lock, read without it.
    state: AtomicU8,
    /// The task reading the connection, woken when the connection is evicted.
    reader: AtomicWaker,
}

/// The counts of admitted connections.
#[derive(Debug, Default)]
struct Registry {
    /// Admitted connections not yet closed or evicted.
    open: u64,
    /// Of those, the pending ones.
    pending: u64,
    /// Pending connections, oldest first. Entries that have since become established or closed
    /// are skipped and dropped lazily, and swept once the queue is twice the pending cap.
    queue: VecDeque<Arc<Slot>>,
    /// Connections refused, evicted and accepts failed since the last warning.
    unreported: u64,
    /// When the last warning was logged.
    warned_at: Option<Instant>,
}

/// The shared state of one listener's limits.
struct Limiter {
    connections_max: u64,
    pending_max: u64,
    handshake_timeout: Duration,
    idle_timeout: Duration,
    registry: Mutex<Registry>,
    metrics: ConnectionMetrics,
}

impl Limiter {
    fn new(limits: &ConnectionLimits, metrics: ConnectionMetrics) -> Limiter {
        Limiter {
            connections_max: limits.connections_max,
            pending_max: limits.pending_allowed(),
            handshake_timeout: Duration::from_millis(limits.handshake_timeout_ms),
            idle_timeout: Duration::from_millis(limits.idle_timeout_ms),
            registry: Mutex::new(Registry::default()),
            metrics,
        }
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        // The registry's counts are changed in single statements; a panic elsewhere while the
        // lock was held leaves them consistent.
        self.registry.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Admits a newly accepted connection, closing the oldest pending one if that makes room;
    /// `None` (and `io` closed) when every slot holds an established connection.
    fn admit<IO>(self: &Arc<Self>, io: IO) -> Option<LimitedConnection<IO>> {
        let mut registry = self.registry();
        let full = registry.open >= self.connections_max;
        let capped = full || registry.pending >= self.pending_max;
        let made_room = capped && self.evict_oldest_pending(&mut registry);
        if full && !made_room {
            self.metrics.observe_close(CloseReason::Refused);
            self.warn(&mut registry, "refused a connection: every slot holds an established connection");
            return None;
        }
        let slot = Arc::new(Slot::default());
        registry.open += 1;
        registry.pending += 1;
        registry.queue.push_back(slot.clone());
        if registry.queue.len() as u64 > 2 * self.pending_max {
            registry.queue.retain(|slot| slot.state.load(Ordering::Acquire) == PENDING);
        }
        assert!(registry.open <= self.connections_max, "open {} > max {}", registry.open, self.connections_max);
        assert!(registry.pending <= self.pending_max, "pending {} > max {}", registry.pending, self.pending_max);
        assert!(registry.queue.len() as u64 <= 2 * self.pending_max + 1);
        self.publish(&registry);
        drop(registry);
        let deadline = Instant::now() + self.handshake_timeout;
        Some(LimitedConnection {
            io,
            slot,
            limiter: self.clone(),
            timer: Box::pin(tokio::time::sleep_until(deadline)),
            received: 0,
            active: false,
            timed_out: false,
        })
    }

    /// Closes the oldest pending connection, if there is one; its slot is free at once.
    fn evict_oldest_pending(&self, registry: &mut Registry) -> bool {
        while let Some(slot) = registry.queue.pop_front() {
            if slot.state.compare_exchange(PENDING, EVICTED, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                registry.open -= 1;
                registry.pending -= 1;
                slot.reader.wake();
                self.metrics.observe_close(CloseReason::Evicted);
                self.warn(registry, "closed the oldest pending connection to make room for a new one");
                return true;
            }
        }
        false
    }

    /// A pending connection sent its handshake.
    fn establish(&self, slot: &Slot) {
        let mut registry = self.registry();
        if slot.state.compare_exchange(PENDING, ESTABLISHED, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            registry.pending -= 1;
            self.publish(&registry);
        }
    }

    /// A connection was dropped: gives its slot back unless eviction already did.
    fn release(&self, slot: &Slot) {
        let mut registry = self.registry();
        match slot.state.swap(CLOSED, Ordering::AcqRel) {
            PENDING => {
                registry.open -= 1;
                registry.pending -= 1;
            }
            ESTABLISHED => registry.open -= 1,
            _ => {}
        }
        self.publish(&registry);
    }

    /// An accept failed; frees a descriptor by closing the oldest pending connection.
    fn accept_failed(&self, error: &(dyn std::error::Error + Send + Sync), pause: Duration) {
        let mut registry = self.registry();
        self.evict_oldest_pending(&mut registry);
        let message = format!(
            "accepting a connection failed ({error}); pausing accepts for {pause:?}. If the open-files limit is reached, raise LimitNOFILE (systemd) or `ulimit -n`, or lower connections.connections_max"
        );
        self.warn(&mut registry, &message);
    }

    /// Logs `what`, at most once per [`WARNING_INTERVAL_MS`].
    fn warn(&self, registry: &mut Registry, what: &str) {
        registry.unreported += 1;
        let now = Instant::now();
        let quiet = registry.warned_at.is_some_and(|at| now < at + Duration::from_millis(WARNING_INTERVAL_MS));
        if quiet {
            return;
        }
        tracing::warn!(
            events_since_last_warning = registry.unreported,
            open = registry.open,
            pending = registry.pending,
            connections_max = self.connections_max,
            pending_max = self.pending_max,
            "connection limits: {what}; see strand_connections_closed_total on /metrics"
        );
        registry.unreported = 0;
        registry.warned_at = Some(now);
    }

    /// Sets this listener's gauges to its counts (called under the registry lock, so the last
    /// value set is the current one).
    fn publish(&self, registry: &Registry) {
        self.metrics.open.set(registry.open as i64);
        self.metrics.pending.set(registry.pending as i64);
    }
}

/// An admitted connection: the accepted stream, closed when it breaks the limits (a read or a
/// write then fails, and the server drops it), its slot given back when dropped.
pub struct LimitedConnection<IO> {
    io: IO,
    slot: Arc<Slot>,
    limiter: Arc<Limiter>,
    /// While pending: the handshake deadline. Once established: a check of idleness, re-armed
    /// one idle timeout ahead whenever it finds traffic since the last check.
    timer: Pin<Box<Sleep>>,
    /// Bytes received while pending.
    received: usize,
    /// Whether bytes went either way since the timer was last armed.
    active: bool,
    /// Whether a timeout ended the connection (it is counted once, however often it is polled).
    timed_out: bool,
}

impl<IO> LimitedConnection<IO> {
    fn state(&self) -> u8 {
        self.slot.state.load(Ordering::Acquire)
    }

    /// The error that ends an evicted connection; registers the reader to be woken by an
    /// eviction while the connection is pending.
    fn evicted(&self, cx: &Context<'_>) -> Option<io::Error> {
        if self.state() != PENDING && self.state() != EVICTED {
            return None;
        }
        self.slot.reader.register(cx.waker());
        (self.state() == EVICTED)
            .then(|| io::Error::new(io::ErrorKind::ConnectionAborted, "closed to make room: it sent no handshake"))
    }

    fn on_received(&mut self, bytes: usize) {
        self.active = true;
        if self.state() != PENDING {
            return;
        }
        self.received += bytes;
        if self.received >= HANDSHAKE_BYTES {
            self.limiter.establish(&self.slot);
            let deadline = Instant::now() + self.limiter.idle_timeout;
            self.timer.as_mut().reset(deadline);
            self.active = false;
        }
    }

    /// Ready with the error that ends the connection once its timer has run out.
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        loop {
            if self.timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let (reason, timeout) = match self.state() {
                PENDING => (CloseReason::Handshake, self.limiter.handshake_timeout),
                ESTABLISHED if self.active => {
                    self.active = false;
                    let deadline = Instant::now() + self.limiter.idle_timeout;
                    self.timer.as_mut().reset(deadline);
                    continue;
                }
                _ => (CloseReason::Idle, self.limiter.idle_timeout),
            };
            if !self.timed_out {
                self.timed_out = true;
                self.limiter.metrics.observe_close(reason);
                tracing::debug!(?reason, ?timeout, "closing an inbound connection");
            }
            let what = if reason == CloseReason::Handshake { "no handshake" } else { "no traffic" };
            return Poll::Ready(io::Error::new(io::ErrorKind::TimedOut, format!("{what} within {timeout:?}")));
        }
    }

    /// A write's result as the connection reports it: bytes written count as traffic, and a write
    /// that could not proceed ends the connection if its time ran out or it was evicted.
    fn after_write(&mut self, cx: &mut Context<'_>, written: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        match written {
            Poll::Ready(Ok(bytes)) => {
                self.active |= bytes > 0;
                Poll::Ready(Ok(bytes))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => self.poll_write_blocked(cx).map(Err),
        }
    }

    /// After a write that could not proceed: the error that ends the connection, if its time
    /// ran out or it was evicted.
    fn poll_write_blocked(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        if let Some(error) = self.evicted(cx) {
            return Poll::Ready(error);
        }
        self.poll_expired(cx)
    }
}

impl<IO> Drop for LimitedConnection<IO> {
    fn drop(&mut self) {
        self.limiter.release(&self.slot);
    }
}

impl<IO: Connected> Connected for LimitedConnection<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for LimitedConnection<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(error) = this.evicted(cx) {
            return Poll::Ready(Err(error));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let bytes = buf.filled().len() - before;
                if bytes > 0 {
                    this.on_received(bytes);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => this.poll_expired(cx).map(Err),
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for LimitedConnection<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.io).poll_write(cx, buf);
        this.after_write(cx, written)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.after_write(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use futures::SinkExt;
    use futures::channel::mpsc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    use super::*;

    /// Long enough never to pass during a test.
    const NEVER_MS: u64 = 600_000;

    type Accepted = Result<DuplexStream, io::Error>;

    struct Listener {
        accepts: mpsc::Sender<Accepted>,
        admitted: Pin<Box<dyn Stream<Item = Result<LimitedConnection<DuplexStream>, io::Error>> + Send>>,
        metrics: ConnectionMetrics,
    }

    impl Listener {
        fn new(connections_max: u64, pending_max: u64, handshake_timeout_ms: u64, idle_timeout_ms: u64) -> Listener {
            let limits = ConnectionLimits { connections_max, pending_max, handshake_timeout_ms, idle_timeout_ms };
            let (accepts, incoming) = mpsc::channel(64);
            let metrics = ConnectionMetrics::unregistered();
            Listener { accepts, admitted: Box::pin(limit(incoming, &limits, metrics.clone())), metrics }
        }

        /// Accepts a connection; answers the client's end and the admitted server end.
        async fn connect(&mut self) -> (DuplexStream, LimitedConnection<DuplexStream>) {
            let (client, server) = tokio::io::duplex(4096);
            self.accepts.send(Ok(server)).await.unwrap();
            let admitted = self.admitted.next().await.unwrap().unwrap();
            (client, admitted)
        }
    }

    /// Sends the handshake from the client and reads it on the server, which establishes it.
    async fn establish(client: &mut DuplexStream, server: &mut LimitedConnection<DuplexStream>) {
        client.write_all(&[0; HANDSHAKE_BYTES]).await.unwrap();
        let mut buffer = [0; HANDSHAKE_BYTES];
        server.read_exact(&mut buffer).await.unwrap();
    }

    /// The error that ends `server`'s next read, within 5 s.
    async fn read_error(server: &mut LimitedConnection<DuplexStream>) -> io::Error {
        let mut buffer = [0; 16];
        let read = tokio::time::timeout(Duration::from_secs(5), server.read(&mut buffer)).await;
        read.expect("the read ends within 5 s").expect_err("the read fails")
    }

    #[tokio::test]
    async fn new_connections_displace_the_oldest_pending_ones_and_established_ones_stay() {
        let mut listener = Listener::new(16, 3, NEVER_MS, NEVER_MS);
        let (mut client, mut established) = listener.connect().await;
        establish(&mut client, &mut established).await;
        let mut pending = Vec::new();
        for _ in 0..5 {
            pending.push(listener.connect().await);
        }
        // Five pending connections under a cap of three: the two oldest were closed.
        for (_, server) in &mut pending[..2] {
            assert_eq!(read_error(server).await.kind(), io::ErrorKind::ConnectionAborted);
        }
        assert_eq!(listener.metrics.closed(CloseReason::Evicted), 2);
        assert_eq!((listener.metrics.open.get(), listener.metrics.pending.get()), (4, 3));
        // The established connection still carries data both ways.
        client.write_all(b"ping").await.unwrap();
        let mut buffer = [0; 4];
        established.read_exact(&mut buffer).await.unwrap();
        established.write_all(b"pong").await.unwrap();
        client.read_exact(&mut buffer).await.unwrap();
        assert_eq!(&buffer, b"pong");
        // Dropping connections gives their slots back.
        drop(pending);
        drop(established);
        assert_eq!((listener.metrics.open.get(), listener.metrics.pending.get()), (0, 0));
    }

    #[tokio::test]
    async fn when_every_slot_is_established_a_new_connection_is_refused() {
        let mut listener = Listener::new(16, 8, NEVER_MS, NEVER_MS);
        let mut held = Vec::new();
        for _ in 0..16 {
            let (mut client, mut server) = listener.connect().await;
            establish(&mut client, &mut server).await;
            held.push((client, server));
        }
        let (mut refused, server) = tokio::io::duplex(4096);
        listener.accepts.send(Ok(server)).await.unwrap();
        let mut next = listener.admitted.next();
        let mut buffer = [0; 4];
        tokio::select! {
            _ = &mut next => panic!("a refused connection is not handed to the server"),
            read = refused.read(&mut buffer) => assert_eq!(read.unwrap(), 0, "the refused connection is closed"),
        }
        assert_eq!(listener.metrics.closed(CloseReason::Refused), 1);
        // A slot given back is taken by the next connection.
        held.pop();
        let (_client, server) = tokio::io::duplex(4096);
        listener.accepts.send(Ok(server)).await.unwrap();
        let _admitted = next.await.unwrap().unwrap();
        assert_eq!(listener.metrics.open.get(), 16);
    }

    #[tokio::test]
    async fn a_silent_connection_times_out_and_an_idle_one_later_but_traffic_keeps_one_open() {
        let mut listener = Listener::new(16, 8, 100, 300);
        let (_silent_client, mut silent) = listener.connect().await;
        let (mut idle_client, mut idle) = listener.connect().await;
        let (mut busy_client, mut busy) = listener.connect().await;
        establish(&mut idle_client, &mut idle).await;
        establish(&mut busy_client, &mut busy).await;

        let started = Instant::now();
        assert_eq!(read_error(&mut silent).await.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_millis(300), "closed after the handshake timeout, not the idle one");
        assert_eq!(listener.metrics.closed(CloseReason::Handshake), 1);

        // The busy connection sends a byte every 50 ms; the idle one nothing.
        let keep_busy = async {
            for _ in 0..20 {
                busy_client.write_all(b"x").await.unwrap();
                busy.read_exact(&mut [0; 1]).await.unwrap();
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        let (error, ()) = tokio::join!(read_error(&mut idle), keep_busy);
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(listener.metrics.closed(CloseReason::Idle), 1, "only the idle connection was closed");
        busy_client.write_all(b"y").await.unwrap();
        busy.read_exact(&mut [0; 1]).await.unwrap();
    }

    #[tokio::test]
    async fn a_failed_accept_frees_a_pending_slot_and_accepting_resumes() {
        let mut listener = Listener::new(16, 8, NEVER_MS, NEVER_MS);
        let (_client, mut pending) = listener.connect().await;
        listener.accepts.send(Err(io::Error::other("too many open files"))).await.unwrap();
        let (_other_client, _other) = listener.connect().await;
        assert_eq!(read_error(&mut pending).await.kind(), io::ErrorKind::ConnectionAborted);
        assert_eq!(listener.metrics.open.get(), 1);
    }

    #[test]
    fn limits_fit_under_the_open_files_limit() {
        let limits = ConnectionLimits::default();
        let (fitted, lowered) = fit_to_open_files(&limits, 1_048_576);
        assert_eq!((fitted.connections_max, lowered), (limits.connections_max, false));
        let (fitted, lowered) = fit_to_open_files(&limits, 1024);
        assert_eq!((fitted.connections_max, lowered), (1024 - DESCRIPTORS_RESERVED, true));
        let (fitted, _) = fit_to_open_files(&limits, 100);
        assert_eq!(fitted.connections_max, crate::config::CONNECTIONS_MIN);
    }
}
