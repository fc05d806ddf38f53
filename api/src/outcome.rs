//! What applying a command or running a query yields: an [`Outcome`] or a [`Refusal`].
//!
//! A refusal (lost claim, invalid transition, unknown id, oversized value) is a value, not a
//! crash: the state machine records it for the request's session like any other answer, so a
//! retried request that was refused is refused again with the same words.
//!
//! A refusal's message quotes ids and other user text through [`printable`], so it stays one
//! line and sends no terminal escape sequence whatever the user sent.
//!
//! Every answer shape is defined here, below the state machine and the commands: the token
//! listing's ([`TokenInfo`], with the [`Role`] it names; `crate::auth` re-exports both) and each
//! shape a command registers (`registered!(answer ...)` in its file, which holds its sample and
//! protobuf mapping), gathered into [`RegisteredAnswer`] by generated code. So this module
//! imports neither `crate::auth` nor `crate::commands` (`tests/tests/tidy.rs`,
//! `api_modules_import_in_layers`).

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::{Actor, Bead, BeadId, Dependency, Event, Namespace, Status, Timestamp};
use crate::printable::printable;

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
    /// Stored orders.
    Orders(Vec<OrderInfo>),
    /// Namespaces of the cluster.
    Namespaces(Vec<NamespaceInfo>),
    /// The outcome of each write of a transaction, in order.
    Txn(Vec<Outcome>),
    /// Whether auth is enabled, and tokens (all of them, or the caller's own).
    Tokens {
        /// Whether auth is enabled.
        enabled: bool,
        /// The tokens, by name (a fingerprint of each hash, never the hash).
        tokens: Vec<TokenInfo>,
    },
    /// An answer shape registered by its command (`crate::commands`).
    Registered(RegisteredAnswer),
}

// The enum of registered answers, generated from the `registered!(answer ...)` lines of the
// commands' files (`build.rs`); each shape it names is defined in this module.
include!(concat!(env!("OUT_DIR"), "/answers_registry.rs"));

/// A namespace's settings and counts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceDetail {
    /// Its name, prefix, bead count, newest event and lease settings.
    pub info: NamespaceInfo,
    /// Its beads by status (every status, zeros included), then `ready`, `leased`, `formulas`
    /// and `orders`.
    pub counts: Vec<(String, u64)>,
}

/// A namespace's work queues, as `namespace queues` and the console show them: what waits, for
/// whom, since when, who holds what, which leases lapse soon, and what was dead-lettered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueDetail {
    /// The reading node's clock, which ages and the expiry window are measured from.
    pub now: Timestamp,
    /// How many beads `ready` lists now.
    pub ready: u64,
    /// Those ready beads by the pool they are routed to (`""`: none), most first.
    pub ready_by_pool: Vec<(String, u64)>,
    /// Those ready beads by assignee (`""`: unassigned), most first.
    pub ready_by_assignee: Vec<(String, u64)>,
    /// The ready bead created longest ago, and when it was created.
    pub oldest_ready: Option<(BeadId, Timestamp)>,
    /// `in_progress` beads by assignee (`""`: nobody), most first: who holds what.
    pub in_progress_by_assignee: Vec<(String, u64)>,
    /// How many beads are dead-lettered (labelled `dead-letter` and not closed).
    pub dead_lettered: u64,
    /// The first of them by creation, at most [`QueueDetail::ROWS_MAX`].
    pub dead_letter_ids: Vec<BeadId>,
    /// How many beads are held under a lease.
    pub leased: u64,
    /// How many of those leases lapse within `window_ms` of `now` (or already have).
    pub expiring: u64,
    /// The window `expiring` counts.
    pub window_ms: u64,
    /// The leases that lapse soonest, at most [`QueueDetail::ROWS_MAX`].
    pub leases: Vec<LeaseHeld>,
}

impl QueueDetail {
    /// Most rows of dead-lettered beads and of leases one answer lists (the counts cover all).
    pub const ROWS_MAX: usize = 100;
    /// The expiry window a request that names none gets: one minute.
    pub const WINDOW_MS_DEFAULT: u64 = 60_000;

    /// Its JSON form (`namespace queues --json`, the console): counts as `{name, count}` lists in
    /// their order, times in milliseconds since the epoch, and the oldest ready bead's age.
    pub fn to_json(&self) -> serde_json::Value {
        let counts = |counts: &[(String, u64)]| -> Vec<serde_json::Value> {
            counts.iter().map(|(name, count)| serde_json::json!({ "name": name, "count": count })).collect()
        };
        let oldest = self.oldest_ready.as_ref().map(|(id, created_at)| {
            serde_json::json!({ "id": id.0, "created_at_ms": created_at.0, "age_ms": (self.now.0 - created_at.0).max(0) })
        });
        let leases: Vec<serde_json::Value> = self
            .leases
            .iter()
            .map(|lease| {
                serde_json::json!({
                    "bead_id": lease.bead_id.0, "holder": lease.holder, "lease_id": lease.lease_id,
                    "expires_at_ms": lease.expires_at.0, "expires_in_ms": lease.expires_at.0 - self.now.0,
                })
            })
            .collect();
        serde_json::json!({
            "now_ms": self.now.0,
            "ready": self.ready,
            "ready_by_pool": counts(&self.ready_by_pool),
            "ready_by_assignee": counts(&self.ready_by_assignee),
            "oldest_ready": oldest,
            "in_progress_by_assignee": counts(&self.in_progress_by_assignee),
            "dead_lettered": self.dead_lettered,
            "dead_letter_ids": self.dead_letter_ids.iter().map(|id| id.0.as_str()).collect::<Vec<_>>(),
            "leased": self.leased,
            "expiring": self.expiring,
            "window_ms": self.window_ms,
            "leases": leases,
        })
    }
}

/// A lease held on a bead, as the queues list it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseHeld {
    /// The bead.
    pub bead_id: BeadId,
    /// Who holds it.
    pub holder: String,
    /// Its fencing token.
    pub lease_id: u64,
    /// When it lapses.
    pub expires_at: Timestamp,
}

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Role {
    /// Everything: beads, orchestration, namespace settings and deletion, purge, import, auth.
    Admin,
    /// Bead and orchestration commands in its namespaces, as its own actor only.
    Agent,
    /// Reads and watches in its namespaces.
    Reader,
}

impl Role {
    /// The role's name, as the CLI takes and prints it.
    pub fn name(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Agent => "agent",
            Role::Reader => "reader",
        }
    }

    /// The role named `name`.
    pub fn parse(name: &str) -> Result<Role, Refusal> {
        match name {
            "admin" => Ok(Role::Admin),
            "agent" => Ok(Role::Agent),
            "reader" => Ok(Role::Reader),
            other => Err(Refusal::Invalid(format!("unknown role {:?}; use admin, agent or reader", printable(other)))),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A token as listings show it: its name and rights, and of its hash only a fingerprint, so a
/// listing never gives out what a forwarded request could carry in a token's place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenInfo {
    /// Unique among the cluster's tokens.
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// The namespaces it may use; empty: every namespace.
    pub namespaces: BTreeSet<Namespace>,
    /// Who its requests act as.
    pub actor: Actor,
    /// When it was made (the state's clock).
    pub created_at: Timestamp,
    /// [`crate::auth::TokenHash::fingerprint`] of its hash.
    pub fingerprint: String,
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

/// A stored order and its firings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderInfo {
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// The formula a firing cooks.
    pub formula: String,
    /// Its trigger in a few words (`cooldown 15m0s`, `cron "0 9 * * *" (UTC)`).
    pub trigger: String,
    /// Where its wisps go: `pool:<name>`, an agent, or empty.
    pub target: String,
    /// Whether its trigger fires it.
    pub enabled: bool,
    /// How many times it fired.
    pub fired: u64,
    /// When it last fired.
    pub last_fired_at: Option<Timestamp>,
    /// The last window it fired in (a cron minute, an event sequence number, a time).
    pub last_window: u64,
    /// The tracking bead of its last firing (empty: never fired).
    pub last_run: String,
    /// When time next allows a firing (cooldown, condition, cron), in ms since the epoch.
    pub next_due_ms: Option<i64>,
    /// Why a stored source no longer parses (empty when it does).
    pub error: String,
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
    /// The lease of claims that name none (`None`: such claims have no lease).
    pub default_lease_ms: Option<u64>,
    /// Expiries before a bead is dead-lettered.
    pub max_deliveries: u32,
}

/// Why a command or query was refused. Every message says what went wrong and what to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum Refusal {
    /// The bead does not exist.
    #[error("bead {} not found; check the id with `strand list`", printable(.0.as_str()))]
    NotFound(BeadId),
    /// The claim lost: someone else holds the bead.
    #[error("bead {} already claimed by {}", printable(id.as_str()), printable(holder))]
    AlreadyClaimed {
        /// The bead.
        id: BeadId,
        /// Who holds it.
        holder: String,
    },
    /// The bead is in a status that cannot be claimed.
    #[error("bead {} not claimable (status {status}); only open beads can be claimed", printable(id.as_str()))]
    NotClaimable {
        /// The bead.
        id: BeadId,
        /// Its status.
        status: Status,
    },
    /// A status change that the transition table forbids.
    #[error("bead {} cannot go from {from} to {to}; allowed from {from}: {allowed}", printable(id.as_str()))]
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
    #[error("{}", printable(.0))]
    Invalid(String),
    /// A value exceeds its named limit.
    #[error("{} is {size} bytes, over the limit of {limit}; shorten it", printable(what))]
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
    /// A conditional write found the bead changed since the revision it names.
    #[error(
        "bead {} is at revision {current}, not {expected}: it changed since it was read; read it again and retry",
        printable(id.as_str())
    )]
    RevisionMismatch {
        /// The bead.
        id: BeadId,
        /// The revision the write was conditional on.
        expected: u64,
        /// The bead's revision now.
        current: u64,
    },
    /// A write fenced by a lease (`--lease-id`) found another lease, or none, on the bead: the
    /// writer's claim was lost (its lease expired, was released, or the bead moved on).
    #[error(
        "claim lost: lease {lease_id} is not bead {}'s current lease (it expired, was released, or belongs to another bead); bead now {}; stop work on it (a lease id fences writes to its own bead only)",
        printable(id.as_str()),
        match current {
            Some(current) => format!("held by {} under lease {current}", printable(holder)),
            None => format!("has no lease (status {status})"),
        }
    )]
    LeaseLost {
        /// The bead.
        id: BeadId,
        /// The lease the write carried.
        lease_id: u64,
        /// The holder of the bead's current lease (empty: none).
        holder: String,
        /// The bead's current lease id, if it has one.
        current: Option<u64>,
        /// The bead's status.
        status: Status,
    },
    /// A lease renewal or release by someone who does not hold the bead's lease, or of a bead
    /// that holds none.
    #[error(
        "bead {} {}",
        printable(id.as_str()),
        if holder.is_empty() {
            "holds no lease (it was claimed without --lease, or its lease expired); only a claim with --lease holds one"
                .to_string()
        } else {
            format!("is leased to {}; only the lease's holder renews or releases it", printable(holder))
        }
    )]
    NotLeaseHolder {
        /// The bead.
        id: BeadId,
        /// The lease's holder (empty: the bead has no lease).
        holder: String,
    },
    /// A controller action decided under a lower term than one already applied: a deposed
    /// leader's late action.
    #[error(
        "a controller action of term {term} came after one of term {current}; a deposed leader's action is not applied"
    )]
    StaleControllerTerm {
        /// The action's term.
        term: u64,
        /// The highest controller term applied.
        current: u64,
    },
    /// One write of a transaction was refused, so none of its writes was applied.
    #[error("write {} of the transaction was refused, so nothing was applied: {refusal}", index + 1)]
    TxnWriteRefused {
        /// The write's position, from 0.
        index: usize,
        /// Why it was refused.
        refusal: Box<Refusal>,
    },
    /// Auth is enabled and the request carries no token, or one the cluster does not know
    /// (revoked, or never made).
    #[error("{}", printable(.0))]
    Unauthenticated(String),
    /// The request's token may not do this.
    #[error("{}", printable(.0))]
    PermissionDenied(String),
    /// A retry of a request whose answer was already acknowledged and forgotten.
    #[error("request {request_seq} of client {client_id} was already answered and acknowledged")]
    RequestTooOld {
        /// The client.
        client_id: u64,
        /// The request.
        request_seq: u64,
    },
    /// A request that names a namespace which must exist (the CLI's `--namespace`) found none of
    /// that name.
    #[error(
        "namespace {} does not exist; {}create it with `strand namespace create {}`, or see the namespaces with `strand namespace list`",
        printable(namespace),
        match closest {
            Some(closest) => format!("did you mean {}? Or ", printable(closest)),
            None => String::new(),
        },
        printable(namespace)
    )]
    NamespaceNotFound {
        /// The name the request gave.
        namespace: String,
        /// The existing namespace closest to it, when one is close enough to be a likely typo
        /// (and the request's token may see it).
        closest: Option<String>,
    },
    /// A release (`strand release`) by someone who does not hold the bead's claim, or of a bead
    /// nobody holds. New variants go here, at the end: the dedup table stores refusals.
    #[error(
        "bead {} {}",
        printable(id.as_str()),
        if holder.is_empty() {
            format!("is not claimed (status {status}); only a claimed bead is released")
        } else {
            format!(
                "is claimed by {}, not by {}; only its holder releases it (name it with --actor)",
                printable(holder),
                printable(actor)
            )
        }
    )]
    NotHolder {
        /// The bead.
        id: BeadId,
        /// Who holds its claim (empty: nobody).
        holder: String,
        /// Who asked to release it.
        actor: String,
        /// The bead's status.
        status: Status,
    },
}

impl Refusal {
    /// A write fenced by `lease_id` found `bead` under another lease, or none.
    pub fn lease_lost(bead: &Bead, lease_id: u64) -> Refusal {
        Refusal::LeaseLost {
            id: bead.id.clone(),
            lease_id,
            holder: bead.lease.as_ref().map(|lease| lease.holder.clone()).unwrap_or_default(),
            current: bead.lease.as_ref().map(|lease| lease.id),
            status: bead.status,
        }
    }
}

/// The result of applying one proposal or running one query.
pub type Answer = Result<Outcome, Refusal>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_text_in_a_refusal_is_escaped_onto_one_line() {
        let id = BeadId("st-1\n\x1b[31mred".into());
        let refusals = [
            Refusal::NotFound(id.clone()),
            Refusal::AlreadyClaimed { id: id.clone(), holder: "mallory\r\x1b[2J".into() },
            Refusal::NotClaimable { id: id.clone(), status: Status::Closed },
            Refusal::Invalid("unknown dependency type x\ny".into()),
            Refusal::TooLarge { what: "label \x1b]0;title\x07".into(), size: 9, limit: 8 },
        ];
        for refusal in refusals {
            let message = refusal.to_string();
            assert_eq!(message.lines().count(), 1, "{message}");
            assert!(!message.chars().any(char::is_control), "{message:?}");
        }
        let message = Refusal::NotFound(id).to_string();
        assert_eq!(message, r"bead st-1\n\u{1b}[31mred not found; check the id with `strand list`");
    }
}
