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
//!
//! Answers are kept compact: a metadata value longer than [`VALUE_BYTES_KEPT_MAX`] is kept as its
//! length and a digest ([`compact_value`]), so that a run with large values (up to
//! `api::limits::METADATA_VALUE_BYTES_MAX` each) keeps a history, and a trace, of modest size.
//! The checkers compare values in that same form.

use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use api::model::{Actor, Bead, BeadId};
use api::outcome::{Outcome, Refusal};

/// Metadata values longer than this are kept in the history as their length and a digest.
pub const VALUE_BYTES_KEPT_MAX: usize = 128;

/// What an agent asked for.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Create a bead with a title unique in the run (exactly-once shows through titles).
    Create {
        /// The unique title.
        title: String,
    },
    /// Create a bead whose metadata is as large as a request may carry: the values of
    /// `crate::workload::large_metadata(title)`.
    CreateLarge {
        /// The unique title, from which the metadata follows.
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
    /// Create a bead for leased claims (label `sim-lease`; the linearizability checker leaves
    /// these beads to the leases checker, since the controller's expiries change them unseen).
    CreateLeasable {
        /// The unique title.
        title: String,
    },
    /// Claim the first ready leasable bead with a lease.
    LeaseClaimNext {
        /// The claimer.
        actor: Actor,
        /// The lease's length.
        lease_ms: u64,
    },
    /// Renew the agent's lease on a bead.
    LeaseRenew {
        /// The bead.
        id: BeadId,
        /// The renewer (the client's actor).
        actor: Actor,
    },
    /// Cook the orderer's formula into a molecule whose root has this unique title.
    Cook {
        /// The root's title.
        title: String,
    },
    /// Sling a new task with this unique title to the simulated pool (with its auto-convoy).
    Sling {
        /// The task's title.
        title: String,
    },
    /// The orchestration agent's `hook --claim` on the simulated pool.
    HookClaim {
        /// The agent.
        agent: Actor,
    },
    /// Close what `hook --claim` gave (which may close its auto-convoy).
    HookClose {
        /// The bead.
        id: BeadId,
    },
    /// Send mail with this unique subject.
    Mail {
        /// The subject.
        subject: String,
    },
    /// Purge closed wisps older than an hour.
    Purge,
    /// Close a bead fenced by a lease id: refused unless it is still the bead's lease.
    FencedClose {
        /// The bead.
        id: BeadId,
        /// The closer.
        actor: Actor,
        /// The lease id the agent holds (perhaps no longer).
        lease_id: u64,
    },
    /// Create a canary bead (label [`crate::workload::CANARY_LABEL`]): its title starts with
    /// [`api::version::CANARY_NEXT_PREFIX`], so the older build's versions apply it and
    /// [`api::version::NEXT_APPLY_VERSION`] refuses it.
    Canary {
        /// The unique title.
        title: String,
    },
}

impl Op {
    /// Whether the operation changes state.
    pub fn is_write(&self) -> bool {
        !matches!(self, Op::Get { .. } | Op::Ready | Op::List { .. })
    }

    /// Whether the operation is part of the orchestration agent's workload.
    pub fn is_orchestration_op(&self) -> bool {
        matches!(
            self,
            Op::Cook { .. }
                | Op::Sling { .. }
                | Op::HookClaim { .. }
                | Op::HookClose { .. }
                | Op::Mail { .. }
                | Op::Purge
        )
    }

    /// Whether the operation is part of the leased-claims workload.
    pub fn is_lease_op(&self) -> bool {
        matches!(
            self,
            Op::CreateLeasable { .. } | Op::LeaseClaimNext { .. } | Op::LeaseRenew { .. } | Op::FencedClose { .. }
        )
    }

    /// The title of a create.
    pub fn created_title(&self) -> Option<&str> {
        match self {
            Op::Create { title } | Op::CreateLarge { title } => Some(title),
            _ => None,
        }
    }
}

/// A metadata value as the history keeps it: itself when at most [`VALUE_BYTES_KEPT_MAX`] bytes,
/// else its length and a digest of its bytes. Compacting a compact value changes nothing.
pub fn compact_value(value: &str) -> String {
    if value.len() <= VALUE_BYTES_KEPT_MAX {
        return value.to_string();
    }
    // `DefaultHasher::new` has fixed keys: the digest is the same in every process.
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut hasher);
    let compact = format!("<{} bytes, digest {:016x}>", value.len(), hasher.finish());
    assert!(compact.len() <= VALUE_BYTES_KEPT_MAX, "a compact value stays compact");
    compact
}

/// A bead with its metadata values compacted ([`compact_value`]).
pub fn compact_bead(mut bead: Bead) -> Bead {
    for value in bead.metadata.values_mut() {
        if value.len() > VALUE_BYTES_KEPT_MAX {
            *value = compact_value(value);
        }
    }
    bead
}

/// An answer as the history keeps it: the metadata values of its beads compacted.
pub fn compact_outcome(outcome: Outcome) -> Outcome {
    match outcome {
        Outcome::Bead(bead) => Outcome::Bead(Box::new(compact_bead(*bead))),
        Outcome::Beads(beads) => Outcome::Beads(beads.into_iter().map(compact_bead).collect()),
        other => other,
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

impl OpResult {
    /// The bead a successful leased claim or renewal answered, with its lease id.
    pub fn leased_bead(&self) -> Option<(&Bead, u64)> {
        let OpResult::Ok(outcome) = self else { return None };
        let bead = match outcome {
            Outcome::Bead(bead) => bead.as_ref(),
            Outcome::Beads(beads) => beads.first()?,
            _ => return None,
        };
        Some((bead, bead.lease.as_ref()?.id))
    }
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
    /// Simulated time of the answer, when there was one.
    pub completed_at: Option<std::time::Duration>,
    /// The answer.
    pub result: OpResult,
    /// Issued by the final reader after the cluster healed.
    pub final_read: bool,
}

impl Entry {
    /// The entry as a trace line: its call time, logical times, agent, operation and result.
    pub fn trace_line(&self) -> String {
        format!(
            "[{:>8.3}s] op {}..{:?} agent-{}{} {:?} -> {:?}",
            self.invoked_at.as_secs_f64(),
            self.invoked,
            self.completed,
            self.agent,
            if self.final_read { " (final)" } else { "" },
            self.op,
            self.result
        )
    }
}

/// The whole history.
#[derive(Debug, Default)]
pub struct History {
    /// Entries in invoke order.
    pub entries: Vec<Entry>,
    clock: u64,
    /// When a run against a real cluster began; `None`: the times are simulated time.
    started: Option<std::time::Instant>,
}

/// A history shared by the agents of one run.
pub type SharedHistory = Arc<Mutex<History>>;

impl History {
    /// An empty history whose times are simulated time, or, with `started`, the wall clock
    /// since then.
    pub fn new(started: Option<std::time::Instant>) -> History {
        History { entries: Vec::new(), clock: 0, started }
    }

    fn now(&self) -> std::time::Duration {
        match self.started {
            Some(started) => started.elapsed(),
            None => turmoil::sim_elapsed().unwrap_or_default(),
        }
    }

    /// Records a call; returns the entry's index for [`History::complete`].
    pub fn invoke(&mut self, agent: usize, op: Op, final_read: bool) -> usize {
        self.clock += 1;
        self.entries.push(Entry {
            agent,
            op,
            invoked: self.clock,
            invoked_at: self.now(),
            completed: None,
            completed_at: None,
            result: OpResult::Pending,
            final_read,
        });
        self.entries.len() - 1
    }

    /// Records an answer. An unknown outcome keeps no completion time.
    pub fn complete(&mut self, index: usize, result: OpResult) {
        self.clock += 1;
        let now = self.now();
        let entry = &mut self.entries[index];
        assert_eq!(entry.result, OpResult::Pending, "an operation completes once");
        if !matches!(result, OpResult::Unknown(_)) {
            entry.completed = Some(self.clock);
            entry.completed_at = Some(now);
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
