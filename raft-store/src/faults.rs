//! Fault points: named places in the store's and the node's own code where, under the
//! simulator only, something goes wrong that the environment alone never makes happen often: an
//! apply that stalls, a log append slow to reach the disk, a slow snapshot build, a response lost
//! after its write took effect, a log write that fails. The simulator arms them ([`arm`], with the `fault-points` feature)
//! and decides, from its seed, which fire and for how long; the code at each point asks
//! [`fire`].
//!
//! Invariant: without the `fault-points` feature (every build but the simulator's), [`fire`] is
//! `None` and inlines to nothing; with it, nothing fires unless this thread armed the points,
//! which only the simulator does.

use std::time::Duration;

/// A place where the simulator may inject a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultPoint {
    /// The state machine waits before applying a batch of committed entries.
    ApplyDelay,
    /// A log append waits before its entries are written and flushed.
    LogFlushDelay,
    /// A snapshot build waits before it starts.
    SnapshotBuildDelay,
    /// A client's write took effect, and its answer is lost: the client sees the connection
    /// fail and must retry with the same request id.
    ResponseDrop,
    /// A log append's write to the disk fails: the append answers an error with
    /// [`INJECTED_FAILURE`] in it, which stops the node's Raft core (a fatal storage error); the
    /// node must be restarted, and comes back from what its disk kept.
    DiskWriteFail,
}

/// What an injected failure says, so that the simulator tells it from a real one.
pub const INJECTED_FAILURE: &str = "a disk write failed (simulated fault point)";

impl FaultPoint {
    /// Every fault point.
    pub const ALL: [FaultPoint; 5] = [
        FaultPoint::ApplyDelay,
        FaultPoint::LogFlushDelay,
        FaultPoint::SnapshotBuildDelay,
        FaultPoint::ResponseDrop,
        FaultPoint::DiskWriteFail,
    ];

    /// Its name, in traces and reports.
    pub fn name(self) -> &'static str {
        match self {
            FaultPoint::ApplyDelay => "apply-delay",
            FaultPoint::LogFlushDelay => "log-flush-delay",
            FaultPoint::SnapshotBuildDelay => "snapshot-build-delay",
            FaultPoint::ResponseDrop => "response-drop",
            FaultPoint::DiskWriteFail => "disk-write-fail",
        }
    }
}

/// Whether `point` fires now, and for how long when it is a delay.
#[inline(always)]
pub fn fire(point: FaultPoint) -> Option<Duration> {
    #[cfg(feature = "fault-points")]
    {
        armed::fire(point)
    }
    #[cfg(not(feature = "fault-points"))]
    {
        let _ = point;
        None
    }
}

/// Waits as long as `point` says, if it fires.
pub async fn delay(point: FaultPoint) {
    if let Some(wait) = fire(point) {
        tokio::time::sleep(wait).await;
    }
}

#[cfg(feature = "fault-points")]
pub use armed::{arm, disarm};

#[cfg(feature = "fault-points")]
mod armed {
    use std::cell::RefCell;
    use std::time::Duration;

    use super::FaultPoint;

    /// What decides whether a point fires.
    pub type Decide = Box<dyn FnMut(FaultPoint) -> Option<Duration>>;

    thread_local! {
        /// The decision of the run this thread simulates (a simulation runs on one thread).
        static ARMED: RefCell<Option<Decide>> = const { RefCell::new(None) };
    }

    /// Arms the fault points on this thread: `decide` answers each time code reaches one.
    pub fn arm(decide: Decide) {
        ARMED.with(|armed| *armed.borrow_mut() = Some(decide));
    }

    /// Disarms them: no point fires on this thread any more.
    pub fn disarm() {
        ARMED.with(|armed| *armed.borrow_mut() = None);
    }

    pub(super) fn fire(point: FaultPoint) -> Option<Duration> {
        ARMED.with(|armed| armed.borrow_mut().as_mut().and_then(|decide| decide(point)))
    }
}
