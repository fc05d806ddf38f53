//! What applying a command or running a query yields: an [`Outcome`] or a [`Refusal`].
//!
//! A refusal (lost claim, invalid transition, unknown id, oversized value) is a value, not a
//! crash: the state machine records it for the request's session like any other answer, so a
//! retried request that was refused is refused again with the same words.

use serde::{Deserialize, Serialize};

use crate::model::{Bead, BeadId, Dependency, Event, Status};

/// A successful answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Outcome {
    /// One bead (create, update, claim, reopen, set_metadata).
    Bead(Box<Bead>),
    /// Several beads (close, queries; claim_next with nothing ready gives an empty list).
    Beads(Vec<Bead>),
    /// Dependency rows.
    Dependencies(Vec<Dependency>),
    /// Done, nothing to show (delete, dep_add, dep_remove).
    Done,
    /// Events, oldest first.
    Events {
        /// The events.
        events: Vec<Event>,
        /// The namespace's newest sequence number when the answer was made (0: none yet).
        last_seq: u64,
    },
    /// A molecule's or a convoy's progress.
    Progress(Box<Progress>),
    /// How many beads a purge removed (or would remove).
    Purged {
        /// The count.
        purged_count: u64,
    },
    /// Stored formulas.
    Formulas(Vec<FormulaInfo>),
    /// Namespaces of the cluster.
    Namespaces(Vec<NamespaceInfo>),
}

/// A container's progress: a molecule root and its steps, or a convoy and its children.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// The root or convoy.
    pub root: Bead,
    /// Its children, in creation (step) order.
    pub children: Vec<Bead>,
    /// The current step: the first not-closed child whose needs are all closed.
    pub current: Option<BeadId>,
}

impl Progress {
    /// Closed children.
    pub fn closed(&self) -> usize {
        self.children.iter().filter(|child| child.status == Status::Closed).count()
    }
}

/// A stored formula.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormulaInfo {
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Number of steps.
    pub steps: u64,
    /// Its TOML source (empty in lists).
    pub source: String,
}

/// One namespace of the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceInfo {
    /// Its name.
    pub name: String,
    /// Its id prefix.
    pub prefix: String,
    /// How many beads it holds.
    pub beads: u64,
    /// Its newest event sequence number.
    pub last_event_seq: u64,
}

/// Why a command or query was refused. Every message says what went wrong and what to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum Refusal {
    /// The bead does not exist.
    #[error("bead {0} not found; check the id with `strand list`")]
    NotFound(BeadId),
    /// The claim lost: someone else holds the bead.
    #[error("bead {id} already claimed by {holder}")]
    AlreadyClaimed {
        /// The bead.
        id: BeadId,
        /// Who holds it.
        holder: String,
    },
    /// The bead is in a status that cannot be claimed.
    #[error("bead {id} not claimable (status {status}); only open beads can be claimed")]
    NotClaimable {
        /// The bead.
        id: BeadId,
        /// Its status.
        status: Status,
    },
    /// A status change that the transition table forbids.
    #[error("bead {id} cannot go from {from} to {to}; allowed from {from}: {allowed}")]
    InvalidTransition {
        /// The bead.
        id: BeadId,
        /// Current status.
        from: Status,
        /// Requested status.
        to: Status,
        /// Allowed next statuses, comma-separated.
        allowed: String,
    },
    /// A field is malformed (empty title, unknown dependency type, self-dependency, ...).
    #[error("{0}")]
    Invalid(String),
    /// A value exceeds its named limit.
    #[error("{what} is {size} bytes, over the limit of {limit}; shorten it")]
    TooLarge {
        /// What was too large.
        what: String,
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// An unlimited list would exceed [`crate::limits::LIST_RESULTS_MAX`].
    #[error("the answer would hold more than {limit} beads; add filters or a --limit")]
    TooManyResults {
        /// The cap.
        limit: usize,
    },
    /// A list with no filter, without `--all`.
    #[error("refusing to list every bead without a filter; add a filter or pass --all")]
    UnfilteredList,
    /// The client's session was evicted from the dedup table, so a retry cannot be told apart
    /// from a new request.
    #[error(
        "client session {client_id} expired from the dedup table; the outcome of request {request_seq} is unknown: check the bead and retry with a new client"
    )]
    SessionExpired {
        /// The client.
        client_id: u64,
        /// The request.
        request_seq: u64,
    },
    /// Events at or below this sequence number were compacted away (as etcd's compacted revision).
    #[error(
        "events after seq {requested} are no longer kept: everything up to seq {compacted} was compacted; resume from seq {compacted} or later (`--after {compacted}`)"
    )]
    Compacted {
        /// The `after` the reader asked for.
        requested: u64,
        /// The highest compacted sequence number.
        compacted: u64,
    },
    /// A retry of a request whose answer was already acknowledged and forgotten.
    #[error("request {request_seq} of client {client_id} was already answered and acknowledged")]
    RequestTooOld {
        /// The client.
        client_id: u64,
        /// The request.
        request_seq: u64,
    },
}

/// The result of applying one proposal or running one query.
pub type Answer = Result<Outcome, Refusal>;
