//! The observed history of a run: every operation a simulated agent invoked, when, and what it
//! got back, in the single real-time order of the simulation.
//!
//! Time here is a logical clock: every invoke and every completion takes the next tick. The
//! simulator runs every host on one thread, so the order in which events are recorded *is* their
//! real-time order, which is all that linearizability needs.
//!
//! Invariant: an operation's completion tick is greater than its invoke tick; an operation
//! whose outcome is unknown (timeout, unavailable, expired session) has no completion tick and
//! may have taken effect at any time after its invoke, or never.

use std::sync::{Arc, Mutex};

use api::model::{Actor, BeadId};
use api::outcome::{Outcome, Refusal};

/// What an agent asked for.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Create a bead with a title unique in the run (exactly-once shows through titles).
    Create {
        /// The unique title.
        title: String,
    },
    /// Claim one bead.
    Claim {
        /// The bead.
        id: BeadId,
        /// The claimer.
        actor: Actor,
    },
    /// Claim the first ready bead.
    ClaimNext {
        /// The claimer.
        actor: Actor,
    },
    /// Set a bead's priority.
    Update {
        /// The bead.
        id: BeadId,
        /// The new priority.
        priority: u8,
    },
    /// Set one metadata key (keys are unique per operation).
    SetMetadata {
        /// The bead.
        id: BeadId,
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Close one bead.
    Close {
        /// The bead.
        id: BeadId,
    },
    /// Read one bead.
    Get {
        /// The bead.
        id: BeadId,
    },
    /// Read the ready beads.
    Ready,
    /// List beads, newest first.
    List {
        /// Most beads returned.
        limit: u32,
    },
}

impl Op {
    /// Whether the operation changes state.
    pub fn is_write(&self) -> bool {
        !matches!(self, Op::Get { .. } | Op::Ready | Op::List { .. })
    }
}

/// What came back.
#[derive(Clone, Debug, PartialEq)]
pub enum OpResult {
    /// Not completed yet.
    Pending,
    /// Applied, with this answer.
    Ok(Outcome),
    /// Refused by the state machine, with no effect.
    Refused(Refusal),
    /// May or may not have taken effect.
    Unknown(String),
}

/// One operation of one agent.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The agent (its index).
    pub agent: usize,
    /// What it asked.
    pub op: Op,
    /// Logical time of the call.
    pub invoked: u64,
    /// Simulated time of the call (for reading traces).
    pub invoked_at: std::time::Duration,
    /// Logical time of the answer; `None` while pending or when the outcome is unknown.
    pub completed: Option<u64>,
    /// The answer.
    pub result: OpResult,
    /// Issued by the final reader after the cluster healed.
    pub final_read: bool,
}

/// The whole history.
#[derive(Debug, Default)]
pub struct History {
    /// Entries in invoke order.
    pub entries: Vec<Entry>,
    clock: u64,
}

/// A history shared by the agents of one run.
pub type SharedHistory = Arc<Mutex<History>>;

impl History {
    /// Records a call; returns the entry's index for [`History::complete`].
    pub fn invoke(&mut self, agent: usize, op: Op, final_read: bool) -> usize {
        self.clock += 1;
        self.entries.push(Entry {
            agent,
            op,
            invoked: self.clock,
            invoked_at: turmoil::sim_elapsed().unwrap_or_default(),
            completed: None,
            result: OpResult::Pending,
            final_read,
        });
        self.entries.len() - 1
    }

    /// Records an answer. An unknown outcome keeps no completion time.
    pub fn complete(&mut self, index: usize, result: OpResult) {
        self.clock += 1;
        let entry = &mut self.entries[index];
        assert_eq!(entry.result, OpResult::Pending, "an operation completes once");
        if !matches!(result, OpResult::Unknown(_)) {
            entry.completed = Some(self.clock);
        }
        entry.result = result;
    }

    /// Marks every operation still pending (its agent stopped first) as unknown.
    pub fn close_pending(&mut self) {
        for entry in &mut self.entries {
            if entry.result == OpResult::Pending {
                entry.result = OpResult::Unknown("still pending when the run ended".into());
            }
        }
    }
}
