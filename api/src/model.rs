//! The bead model of docs/beads.md §1: beads, statuses, dependencies, and the newtypes that carry
//! their preconditions (`BeadId`, `Actor`, `Namespace`, `Timestamp`).
//!
//! These types are what the state machine stores and what snapshots carry, so they derive plain
//! serde (no `skip_serializing_if`, no `flatten`): the binary encoding used on disk must be able to
//! read back exactly what it wrote. The one `skip` ([`Bead::counts`]) is symmetric: the field is
//! neither written nor read by any encoding, so records keep their layout. JSON shapes for users
//! live in the CLI.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch, stamped by the Raft leader when it proposes a command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// Renders the timestamp as RFC 3339 with millisecond precision, in UTC.
    pub fn to_rfc3339(self) -> String {
        let millis = u64::try_from(self.0).unwrap_or(0);
        let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(millis);
        humantime::format_rfc3339_millis(time).to_string()
    }

    /// Parses an RFC 3339 timestamp with any UTC offset (`Z` as [`Timestamp::to_rfc3339`]
    /// writes it, or `+02:00` as a local clock does); times before 1970 are refused.
    pub fn parse_rfc3339(text: &str) -> Option<Timestamp> {
        let millis = chrono::DateTime::parse_from_rfc3339(text.trim()).ok()?.timestamp_millis();
        (millis >= 0).then_some(Timestamp(millis))
    }
}

/// A bead id, `<prefix>-<n>`, assigned by the store.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BeadId(pub String);

impl BeadId {
    /// The prefix part of the id (everything before the last `-`), used so a child takes its
    /// parent's prefix.
    pub fn prefix(&self) -> &str {
        self.0.rsplit_once('-').map_or(self.0.as_str(), |(prefix, _)| prefix)
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for BeadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for BeadId {
    fn from(text: &str) -> Self {
        BeadId(text.to_string())
    }
}

/// The name of an agent or person acting on beads (claims, closes, sends mail).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Actor(pub String);

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One isolated bead store inside the cluster (a city or a rig of an orchestrator).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Namespace(pub String);

impl Namespace {
    /// The namespace used when a request names none.
    pub const DEFAULT: &'static str = "default";

    /// The default namespace.
    pub fn default_namespace() -> Namespace {
        Namespace(Self::DEFAULT.to_string())
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The status of a bead: `bd`'s set of seven.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Status {
    /// Waiting to be worked on.
    Open,
    /// Claimed and being worked on.
    InProgress,
    /// Explicitly marked blocked.
    Blocked,
    /// Put off until later.
    Deferred,
    /// Pinned (kept open, never ready).
    Pinned,
    /// Attached to an agent's hook.
    Hooked,
    /// Done.
    Closed,
}

impl Status {
    /// Every status, in the order the help text lists them.
    pub const ALL: [Status; 7] = [
        Status::Open,
        Status::InProgress,
        Status::Blocked,
        Status::Deferred,
        Status::Pinned,
        Status::Hooked,
        Status::Closed,
    ];

    /// The wire and CLI name of the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Open => "open",
            Status::InProgress => "in_progress",
            Status::Blocked => "blocked",
            Status::Deferred => "deferred",
            Status::Pinned => "pinned",
            Status::Hooked => "hooked",
            Status::Closed => "closed",
        }
    }

    /// Parses a status name; `None` for anything outside the seven.
    pub fn parse(text: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|status| status.as_str() == text)
    }

    /// Gas City's three-way fold: closed, in_progress, everything else open.
    pub fn folded(self) -> Status {
        match self {
            Status::Closed => Status::Closed,
            Status::InProgress => Status::InProgress,
            _ => Status::Open,
        }
    }

    /// The statuses a bead in this status may move to through `update` (staying put is always
    /// allowed). `closed` only goes back to `open`, which is what `reopen` does.
    pub fn allowed_next(self) -> &'static [Status] {
        use Status::*;
        match self {
            Open => &[InProgress, Blocked, Deferred, Pinned, Hooked, Closed],
            InProgress => &[Open, Blocked, Deferred, Hooked, Closed],
            Blocked => &[Open, InProgress, Deferred, Closed],
            Deferred => &[Open, Blocked, Closed],
            Pinned => &[Open, Closed],
            Hooked => &[Open, InProgress, Closed],
            Closed => &[Open],
        }
    }

    /// Whether `update --status next` is a valid transition from this status.
    pub fn can_become(self, next: Status) -> bool {
        self == next || self.allowed_next().contains(&next)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The type of a dependency edge.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DepType(pub String);

impl DepType {
    /// The default edge type, which blocks readiness.
    pub const BLOCKS: &'static str = "blocks";
    /// A child-of edge: the child is blocked while its parent is blocked.
    pub const PARENT_CHILD: &'static str = "parent-child";
    /// Edge types whose unclosed target keeps the source from being ready.
    pub const BLOCKING: [&'static str; 3] = ["blocks", "conditional-blocks", "waits-for"];

    /// The default `blocks` type.
    pub fn blocks() -> DepType {
        DepType(Self::BLOCKS.to_string())
    }

    /// Whether an unclosed target of this edge blocks the source.
    pub fn blocks_until_closed(&self) -> bool {
        Self::BLOCKING.contains(&self.0.as_str())
    }

    /// Whether the source inherits the target's blocked state (`parent-child`).
    pub fn inherits_blocked(&self) -> bool {
        self.0 == Self::PARENT_CHILD
    }
}

/// A dependency edge `{issue_id, depends_on_id, type}`: `issue_id` waits for `depends_on_id`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Dependency {
    /// The bead that waits.
    pub issue_id: BeadId,
    /// The bead it waits for.
    pub depends_on_id: BeadId,
    /// The edge type.
    pub dep_type: DepType,
}

/// Bead types that `ready` never returns (infrastructure beads).
pub const INFRASTRUCTURE_TYPES: [&str; 8] =
    ["merge-request", "gate", "molecule", "message", "session", "agent", "role", "rig"];

/// Bead types that are containers (case-sensitive: `convoy` is one, `CONVOY` is not).
pub const CONTAINER_TYPES: [&str; 2] = ["convoy", "epic"];

/// The default bead type.
pub const DEFAULT_TYPE: &str = "task";

/// Whether `ready` leaves beads of this type out.
pub fn is_infrastructure_type(bead_type: &str) -> bool {
    INFRASTRUCTURE_TYPES.contains(&bead_type)
}

/// Whether beads of this type are containers (exact, case-sensitive match).
pub fn is_container_type(bead_type: &str) -> bool {
    CONTAINER_TYPES.contains(&bead_type)
}

/// A bead: the unit of work, message or container, with every field of docs/beads.md §1.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bead {
    /// `<prefix>-<n>`.
    pub id: BeadId,
    /// The creation sequence number `n` in the id, unique within the namespace.
    pub seq: u64,
    /// Required, non-empty.
    pub title: String,
    /// Free text.
    pub description: String,
    /// Working notes (bd's `notes`), separate from the description.
    pub notes: String,
    /// One of the seven statuses.
    pub status: Status,
    /// Free string, case-sensitive; `task` by default.
    pub bead_type: String,
    /// 0 (highest) to 4; `None` when unset.
    pub priority: Option<u8>,
    /// Empty when unassigned.
    pub assignee: String,
    /// Sender (messages).
    pub from: String,
    /// Parent bead, `None` for roots.
    pub parent_id: Option<BeadId>,
    /// Step id (molecule steps) or formula name (molecule roots).
    pub reference: String,
    /// Exact-match labels.
    pub labels: BTreeSet<String>,
    /// Absent and empty string are different.
    pub metadata: BTreeMap<String, String>,
    /// Wisps: left out of `ready` unless asked, eligible for garbage collection.
    pub ephemeral: bool,
    /// bd's `no_history`: durable, kept apart from wisps. Strand keeps no per-bead history, so
    /// the flag is stored, returned and queryable, and changes nothing else.
    pub no_history: bool,
    /// When the store created the bead.
    pub created_at: Timestamp,
    /// When the bead last changed.
    pub updated_at: Timestamp,
    /// The Raft log index of the command that last changed the bead (etcd's `mod_revision`):
    /// equal on every replica, and higher after every change. Conditional writes compare it.
    pub revision: u64,
    /// When the bead was last claimed.
    pub started_at: Option<Timestamp>,
    /// When the bead was closed; `None` while not closed.
    pub closed_at: Option<Timestamp>,
    /// Text given at close.
    pub close_reason: Option<String>,
    /// Not ready before this time.
    pub defer_until: Option<Timestamp>,
    /// Outgoing dependency edges (what this bead waits for), keyed by target.
    pub depends_on: BTreeMap<BeadId, DepType>,
    /// The lease of a leased claim: held only while the bead is `in_progress` with the lease's
    /// holder as its assignee.
    pub lease: Option<Lease>,
    /// How many leases of this bead expired (Kafka's and JetStream's delivery count).
    pub delivery_count: u32,
    /// What a read tells of the bead beyond its fields (bd's `IssueWithCounts`), filled in from
    /// the namespace's indexes by every query that answers beads. Never stored: `serde(skip)`
    /// leaves it out of every encoding (records, log entries, snapshots, the dedup table) and
    /// reads it back as zeros, so the stored layout is unchanged; a bead held by the state, and a
    /// command's answer, carry zeros.
    #[serde(skip)]
    pub counts: BeadCounts,
}

/// The counts a query answers with each bead (see [`Bead::counts`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BeadCounts {
    /// `blocks` edges of other beads that point at this one (bd's `dependent_count`).
    pub dependents: u32,
    /// Comments in the notes: lines that start with [`COMMENT_MARK`] (bd's `comment_count`).
    pub comments: u32,
}

/// What starts a comment in a bead's notes: `strand comment ID TEXT` appends the line
/// `[comment] <author>: TEXT`. bd keeps comments in a table of their own; Strand keeps them in
/// the notes, and counts the lines that start with this.
pub const COMMENT_MARK: &str = "[comment] ";

/// How many comments the notes hold: their lines that start with [`COMMENT_MARK`].
pub fn comment_count(notes: &str) -> u32 {
    let count = notes.split('\n').filter(|line| line.starts_with(COMMENT_MARK)).count();
    u32::try_from(count).unwrap_or(u32::MAX)
}

/// A leased claim. Its id is the fencing token a holder's writes carry: the log index of the claim
/// that granted it, so unique, and higher for every later grant. Expiry is judged by the leader's
/// monotonic clock from the last grant or renewal; `expires_at` is the leader's wall-clock view of
/// it, for people to read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The fencing token.
    pub id: u64,
    /// Who holds it (the bead's assignee).
    pub holder: String,
    /// How long it lasts after each grant or renewal, in milliseconds.
    pub ttl_ms: u64,
    /// The log index of its grant or latest renewal: a controller's expiry names it, so a lease
    /// renewed after the leader judged it is not expired.
    pub renewed_at: u64,
    /// When it lapses by the wall clock of the leader that granted or renewed it.
    pub expires_at: Timestamp,
}

impl Bead {
    /// The ids this bead waits for through an edge that blocks readiness (the `needs` field).
    pub fn needs(&self) -> Vec<BeadId> {
        self.depends_on
            .iter()
            .filter(|(_, dep_type)| dep_type.blocks_until_closed())
            .map(|(bead_id, _)| bead_id.clone())
            .collect()
    }

    /// The outgoing edges as `Dependency` rows.
    pub fn dependencies(&self) -> Vec<Dependency> {
        self.depends_on
            .iter()
            .map(|(target, dep_type)| Dependency {
                issue_id: self.id.clone(),
                depends_on_id: target.clone(),
                dep_type: dep_type.clone(),
            })
            .collect()
    }
}

/// Label that opts a convoy out of auto-close.
pub const LABEL_OWNED: &str = "owned";
/// Label every message carries.
pub const LABEL_MESSAGE: &str = "gc:message";
/// Label a message gets once read.
pub const LABEL_READ: &str = "read";
/// Label of a bead whose leases expired `max_deliveries` times (it is `blocked` then).
pub const LABEL_DEAD_LETTER: &str = "dead-letter";
/// Prefix of a message's thread label, `thread:<id>`.
pub const THREAD_LABEL_PREFIX: &str = "thread:";
/// Prefix of a reply's label naming the message it answers, `reply-to:<id>`.
pub const REPLY_TO_LABEL_PREFIX: &str = "reply-to:";
/// Prefix of a pool routing label, `pool:<name>`.
pub const POOL_LABEL_PREFIX: &str = "pool:";
/// Metadata key newer orchestrators route to a pool with.
pub const ROUTED_TO_KEY: &str = "gc.routed_to";
/// Metadata key recording how a slung bead's work should merge (`direct`, `mr`, `local`).
pub const MERGE_KEY: &str = "gc.merge";
/// The type of a message bead.
pub const MESSAGE_TYPE: &str = "message";
/// The type of a convoy bead.
pub const CONVOY_TYPE: &str = "convoy";
/// The type of a molecule root.
pub const MOLECULE_TYPE: &str = "molecule";

/// The pool a bead is routed to: the `pool:<name>` label, else `gc.routed_to` metadata.
pub fn routed_pool(bead: &Bead) -> Option<&str> {
    bead.labels
        .iter()
        .find_map(|label| label.strip_prefix(POOL_LABEL_PREFIX))
        .or_else(|| bead.metadata.get(ROUTED_TO_KEY).map(String::as_str))
        .filter(|pool| !pool.is_empty())
}

/// The kinds of event of docs/beads.md §7 that the state machine records.
pub mod event_type {
    /// A bead was created.
    pub const BEAD_CREATED: &str = "bead.created";
    /// A bead's fields changed.
    pub const BEAD_UPDATED: &str = "bead.updated";
    /// A bead was claimed.
    pub const BEAD_CLAIMED: &str = "bead.claimed";
    /// A bead was closed.
    pub const BEAD_CLOSED: &str = "bead.closed";
    /// A bead was deleted.
    pub const BEAD_DELETED: &str = "bead.deleted";
    /// A convoy was created.
    pub const CONVOY_CREATED: &str = "convoy.created";
    /// A convoy closed (its last child closed, or it was landed).
    pub const CONVOY_CLOSED: &str = "convoy.closed";
    /// A message was sent.
    pub const MAIL_SENT: &str = "mail.sent";
    /// A message was marked read.
    pub const MAIL_READ: &str = "mail.read";
    /// A message was archived.
    pub const MAIL_ARCHIVED: &str = "mail.archived";
    /// A leased claim's holder released it.
    pub const LEASE_RELEASED: &str = "lease.released";
    /// A lease expired and its bead went back to `open`; the message names the old holder.
    pub const LEASE_EXPIRED: &str = "lease.expired";
    /// A bead whose leases expired `max_deliveries` times was blocked with the `dead-letter` label.
    pub const BEAD_DEAD_LETTERED: &str = "bead.dead_lettered";
    /// Every type, for validating `--type` filters.
    pub const ALL: [&str; 13] = [
        BEAD_CREATED,
        BEAD_UPDATED,
        BEAD_CLAIMED,
        BEAD_CLOSED,
        BEAD_DELETED,
        CONVOY_CREATED,
        CONVOY_CLOSED,
        MAIL_SENT,
        MAIL_READ,
        MAIL_ARCHIVED,
        LEASE_RELEASED,
        LEASE_EXPIRED,
        BEAD_DEAD_LETTERED,
    ];
}

/// One entry of a namespace's event log: `{seq, type, ts, actor, subject, message?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Gap-free, increasing within the namespace, starting at 1.
    pub seq: u64,
    /// One of [`event_type`].
    pub event_type: String,
    /// The leader-stamped time of the command that caused it.
    pub timestamp: Timestamp,
    /// Who sent the command (empty when unknown).
    pub actor: String,
    /// The bead it is about.
    pub subject: String,
    /// A short human-readable note (the bead's title, a close reason).
    pub message: String,
}
