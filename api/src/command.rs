//! The commands of the bead state machine and the envelope they travel in through the Raft log.
//!
//! A [`Proposal`] is what the leader appends: the command plus everything the state machine would
//! otherwise have to ask the outside world for (the time, the default id prefix, the client's
//! session). That is what keeps [`crate::state`] deterministic and free of I/O.
//! A [`Query`] is a read; it never enters the log. The commands themselves, [`Command`] and each
//! command's type, are defined in `crate::commands`, one file each, and re-exported here with the
//! types their fields use.

use serde::{Deserialize, Serialize};

pub use crate::commands::Command;
pub use crate::commands::controller::{ControllerAction, JudgedLease};
pub use crate::commands::import::is_create_with_id;
pub use crate::commands::import_undo::ImportedBead;
pub use crate::commands::txn::{Condition, Fence};
pub use crate::commands::writes::*;
use crate::model::{Actor, BeadId, Namespace, Status, Timestamp};

/// Identifies a retried request: the client's id, its request number, and the lowest request
/// number the client is still waiting on (everything below it the client has seen answered).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestId {
    /// Random id a client picks once per process.
    pub client_id: u64,
    /// Increases by one per mutating request of this client, starting at 1.
    pub request_seq: u64,
    /// The lowest `request_seq` of this client whose answer it has not yet received.
    pub lowest_unacked: u64,
}

/// One entry of the Raft log: a command stamped by the leader.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    /// `None` for internal commands (the controller's), which are never retried by a client.
    pub request_id: Option<RequestId>,
    /// The leader's clock when it proposed the command.
    pub timestamp: Timestamp,
    /// The id prefix a namespace gets when this command is its first use (the client's, else the
    /// cluster's configured one). Empty: the command may not create its namespace, which must
    /// exist (the CLI's `--namespace`); it is refused with `Refusal::NamespaceNotFound` otherwise.
    /// An empty prefix was never a valid one, so entries written before this rule read the same.
    pub default_prefix: String,
    /// The namespace the command acts on.
    pub namespace: Namespace,
    /// Who sent the command (recorded in its events; empty when the client named no one).
    pub actor: Actor,
    /// How many events the namespace keeps (from the leader's config); older ones are compacted.
    pub event_retention: u64,
    /// The SHA-256 of the token the client sent, if any: with auth enabled, the state machine
    /// judges the command by that token's rights when it applies it (`crate::auth`).
    pub credential: Option<crate::auth::TokenHash>,
    /// What to do.
    pub command: Command,
}

impl Proposal {
    /// Whether the command may create its namespace when there is none of that name yet (see
    /// [`Proposal::default_prefix`]).
    pub fn may_create_namespace(&self) -> bool {
        !self.default_prefix.is_empty()
    }
}

/// The `prefix` a write carries to the leader when it may not create its namespace: the leader
/// stamps it as the proposal's empty [`Proposal::default_prefix`].
pub const PREFIX_NAMESPACE_MUST_EXIST: &str = "";

/// Where a cook's formula comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FormulaSource {
    /// A formula stored in the namespace under this name.
    Named(String),
    /// The TOML source itself.
    Inline(String),
}

/// The filters of `ready` (docs/beads.md §4), AND-ed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadyFilter {
    /// Only beads assigned to this actor.
    pub assignee: Option<String>,
    /// Only unassigned beads.
    pub unassigned: bool,
    /// Beads carrying every one of these labels.
    pub labels_all: Vec<String>,
    /// Beads carrying at least one of these labels.
    pub labels_any: Vec<String>,
    /// Beads carrying none of these labels.
    pub exclude_labels: Vec<String>,
    /// Beads whose metadata has each key set to the value.
    pub metadata_equals: Vec<(String, String)>,
    /// Beads whose metadata has each key.
    pub metadata_has_keys: Vec<String>,
    /// Beads below this parent, at any depth.
    pub parent: Option<BeadId>,
    /// Beads of one of these types.
    pub types: Vec<String>,
    /// Beads of none of these types.
    pub exclude_types: Vec<String>,
    /// Include wisps.
    pub include_ephemeral: bool,
    /// At most this many; 0 means unlimited (up to [`crate::limits::LIST_RESULTS_MAX`]).
    pub limit: u32,
}

/// How `list` orders its answer (ties broken by id).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ListSort {
    /// Newest first.
    #[default]
    CreatedDesc,
    /// Oldest first.
    CreatedAsc,
}

/// Where a page of `list` ends: the position of its last bead in creation order. The next page
/// starts strictly after it, so pages never repeat or skip a bead that existed throughout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListCursor {
    /// The bead's creation time, milliseconds.
    pub created_at: i64,
    /// Its creation sequence number.
    pub seq: u64,
    /// Its id.
    pub id: BeadId,
}

/// How a cursor is written: `c1.<namespace>.<created_at>.<seq>.<id>`, names in hex.
const CURSOR_VERSION: &str = "c1";

impl ListCursor {
    /// The cursor just after `bead`.
    pub fn after(bead: &crate::model::Bead) -> ListCursor {
        ListCursor { created_at: bead.created_at.0, seq: bead.seq, id: bead.id.clone() }
    }

    /// The cursor as text, bound to the namespace it pages through.
    pub fn encode(&self, namespace: &crate::model::Namespace) -> String {
        let hex = |text: &str| crate::printable::hex(text.as_bytes());
        format!("{CURSOR_VERSION}.{}.{}.{}.{}", hex(&namespace.0), self.created_at, self.seq, hex(&self.id.0))
    }

    /// Reads a cursor, refusing one that is malformed or was made in another namespace.
    pub fn decode(text: &str, namespace: &crate::model::Namespace) -> Result<ListCursor, crate::outcome::Refusal> {
        let malformed = || {
            crate::outcome::Refusal::Invalid(format!(
                "cursor {:?} is malformed; pass the cursor a previous page printed, unchanged",
                crate::printable::printable(text)
            ))
        };
        let unhex = |text: &str| -> Option<String> {
            let bytes: Option<Vec<u8>> = (0..text.len())
                .step_by(2)
                .map(|at| text.get(at..at + 2).and_then(|pair| u8::from_str_radix(pair, 16).ok()))
                .collect();
            String::from_utf8(bytes?).ok()
        };
        let parts: Vec<&str> = text.split('.').collect();
        let [version, cursor_namespace, created_at, seq, id] = parts.as_slice() else { return Err(malformed()) };
        if *version != CURSOR_VERSION {
            return Err(malformed());
        }
        let cursor_namespace = unhex(cursor_namespace).ok_or_else(malformed)?;
        if cursor_namespace != namespace.0 {
            return Err(crate::outcome::Refusal::Invalid(format!(
                "the cursor pages through namespace {:?}, not {:?}; start the listing again without a cursor",
                crate::printable::printable(&cursor_namespace),
                crate::printable::printable(&namespace.0)
            )));
        }
        Ok(ListCursor {
            created_at: created_at.parse().map_err(|_| malformed())?,
            seq: seq.parse().map_err(|_| malformed())?,
            id: BeadId(unhex(id).ok_or_else(malformed)?),
        })
    }
}

/// The filters of `list`, AND-ed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListFilter {
    /// Only beads in one of these statuses; empty means any. Naming `closed` includes closed
    /// beads. Several statuses are read in one pass over their indexes (one consistent answer).
    pub statuses: Vec<Status>,
    /// Only this assignee.
    pub assignee: Option<String>,
    /// Beads carrying every one of these labels.
    pub labels_all: Vec<String>,
    /// Only this type.
    pub bead_type: Option<String>,
    /// Only direct children of this parent.
    pub parent: Option<BeadId>,
    /// Metadata key equals value.
    pub metadata_equals: Vec<(String, String)>,
    /// Include closed beads, and allow a list with no other filter (a full scan).
    pub all: bool,
    /// At most this many; 0 means unlimited (up to [`crate::limits::LIST_RESULTS_MAX`]).
    pub limit: u32,
    /// Order.
    pub sort: ListSort,
    /// Start strictly after this position in `sort` order (keyset paging).
    pub after: Option<ListCursor>,
}

impl ListFilter {
    /// Whether the filter names nothing but `all`/`limit`/`sort`.
    pub fn is_unfiltered(&self) -> bool {
        self.statuses.is_empty()
            && self.assignee.is_none()
            && self.labels_all.is_empty()
            && self.bead_type.is_none()
            && self.parent.is_none()
            && self.metadata_equals.is_empty()
    }
}

/// Which way `dep_list` follows edges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum DepDirection {
    /// What the bead depends on.
    #[default]
    Down,
    /// What depends on the bead.
    Up,
}

/// A read of the state machine. Reads never enter the Raft log.
// A query lives for one read, so its size matters less than a boxed variant's extra step.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Query {
    /// Every namespace of the cluster (the request's namespace is ignored).
    Namespaces,
    /// Whether auth is enabled, and every token (never a token itself: names, hashes and rights).
    Tokens,
    /// Whether auth is enabled, and the token the read was made with (the node judges reads by
    /// their token, so this answers the caller's own).
    WhoAmI,
    /// A query defined in a file of its own (`crate::commands`): every query but the three above.
    Registered(crate::commands::RegisteredRead),
}

impl std::fmt::Display for Proposal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} in {} at {} by {:?}", self.command.name(), self.namespace, self.timestamp.0, self.actor.0)?;
        if let Some(request_id) = &self.request_id {
            write!(f, " (client {} request {})", request_id.client_id, request_id.request_seq)?;
        }
        Ok(())
    }
}
