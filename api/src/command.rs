//! The commands of the bead state machine and the envelope they travel in through the Raft log.
//!
//! A [`Proposal`] is what the leader appends: the command plus everything the state machine would
//! otherwise have to ask the outside world for (the time, the default id prefix, the client's
//! session). That is what keeps [`crate::state`] deterministic and free of I/O.
//! A [`Query`] is a read; it never enters the log. The commands themselves, [`Command`] and each
//! command's type, are defined in `crate::commands`, one file each, and re-exported here with the
//! types their fields use; the plain data among those (a request's id, the listings' filters and
//! cursors, a cook's formula source) is defined in [`crate::input`], below the state machine.
//! [`validate_command`] checks a command's fields (each command's file says what it checks); the
//! node runs it before proposing, the state machine's dispatch again at apply.

use serde::{Deserialize, Serialize};

pub use crate::commands::Command;
pub use crate::commands::controller::{ControllerAction, JudgedLease};
pub use crate::commands::import::is_create_with_id;
pub use crate::commands::import_undo::ImportedBead;
pub use crate::commands::txn::{Condition, Fence};
pub use crate::commands::writes::*;
pub use crate::input::{DepDirection, FormulaSource, ListCursor, ListFilter, ListSort, ReadyFilter, RequestId};
use crate::model::{Actor, Namespace, Timestamp};
use crate::outcome::Refusal;

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

/// Checks a command's shape: sizes, counts, non-empty titles, priority range (each command's
/// file says what it checks).
pub fn validate_command(command: &Command) -> Result<(), Refusal> {
    command.validate()
}

/// Checks a transaction and each of its writes as the cluster does before applying it.
pub fn validate_txn(txn: &Txn) -> Result<(), Refusal> {
    crate::commands::WriteCommand::validate(txn)
}
