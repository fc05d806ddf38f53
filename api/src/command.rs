//! The commands of the bead state machine and the envelope they travel in through the Raft log.
//!
//! A [`Proposal`] is what the leader appends: the command plus everything the state machine would
//! otherwise have to ask the outside world for (the time, the default id prefix, the client's
//! session). That is what keeps [`crate::state`] deterministic and free of I/O.
//! A [`Query`] is a read; it never enters the log.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::model::{Actor, Bead, BeadId, DepType, Namespace, Status, Timestamp};

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

/// A mutating command. Every variant is applied atomically or refused with no effect.
/// Stored in the log by its variant index: new variants go at the end (`tests/golden/storage-format.txt`
/// pins every variant's encoding).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Command {
    /// Create one bead.
    Create(CreateBead),
    /// Change fields of one bead; unset fields stay unchanged.
    Update(UpdateBead),
    /// Set (or with `None`, remove) metadata keys of one bead, all in one step.
    SetMetadata {
        /// The bead.
        id: BeadId,
        /// Key to new value; `None` removes the key.
        entries: BTreeMap<String, Option<String>>,
    },
    /// Claim one bead for an actor (docs/beads.md §3), with a lease when `lease_ms` is set.
    Claim {
        /// The bead.
        id: BeadId,
        /// Who claims it.
        actor: Actor,
        /// The lease, in milliseconds ([`crate::limits::LEASE_MS_MIN`] to
        /// [`crate::limits::LEASE_MS_MAX`]); `None`: a claim without a lease, as before leases.
        lease_ms: Option<u64>,
    },
    /// Renew the proposal's actor's lease on a bead, for its lease's length again.
    LeaseRenew {
        /// The bead.
        id: BeadId,
        /// The lease it must still be (`None`: whichever lease the actor holds).
        lease_id: Option<u64>,
    },
    /// Give up the proposal's actor's leased claim: the bead goes back to `open`, unassigned.
    LeaseRelease {
        /// The bead.
        id: BeadId,
        /// The lease it must still be (`None`: whichever lease the actor holds).
        lease_id: Option<u64>,
    },
    /// An action of the leader's controller, fenced by the term it was decided in: refused when
    /// a controller of a higher term has acted.
    Controller {
        /// The Raft term of the leader that decided the action.
        term: u64,
        /// What to do.
        action: ControllerAction,
    },
    /// Find the first ready bead matching the filter and claim it in the same step.
    ClaimNext {
        /// Who claims it.
        actor: Actor,
        /// Which beads qualify; `limit` is ignored.
        filter: ReadyFilter,
        /// A lease for the claim, as [`Command::Claim`]'s.
        lease_ms: Option<u64>,
    },
    /// Close beads; closing a closed bead succeeds and changes nothing.
    Close {
        /// The beads, at most [`crate::limits::IDS_PER_REQUEST_MAX`].
        ids: Vec<BeadId>,
        /// Why, recorded on each bead.
        reason: Option<String>,
    },
    /// Move a closed bead back to open.
    Reopen {
        /// The bead.
        id: BeadId,
    },
    /// Remove a bead and every dependency edge that touches it.
    Delete {
        /// The bead.
        id: BeadId,
    },
    /// Add (or retype) a dependency edge.
    DepAdd {
        /// The bead that waits.
        issue_id: BeadId,
        /// The bead it waits for.
        depends_on_id: BeadId,
        /// The edge type.
        dep_type: DepType,
    },
    /// Remove a dependency edge; removing a missing edge is a no-op.
    DepRemove {
        /// The bead that waits.
        issue_id: BeadId,
        /// The bead it waited for.
        depends_on_id: BeadId,
    },
    /// Create the proposal's namespace with this id prefix (no-op if it exists with that prefix).
    NamespaceCreate {
        /// Prefix of its ids.
        prefix: String,
    },
    /// Change the proposal's namespace's lease settings (created first if it does not exist);
    /// `None` leaves a setting as it is.
    NamespaceConfigure {
        /// The lease of claims that name none: `Some(None)` clears it.
        default_lease_ms: Option<Option<u64>>,
        /// Expiries before a bead is dead-lettered (1 to [`crate::limits::MAX_DELIVERIES_MAX`]).
        max_deliveries: Option<u32>,
    },
    /// Delete the proposal's namespace; refused while it holds beads unless `force`.
    NamespaceDelete {
        /// Delete its beads, events and formulas too.
        force: bool,
    },
    /// Store (or replace) a named formula; the source is parsed and checked first.
    FormulaPut {
        /// The formula's TOML.
        source: String,
    },
    /// Remove a stored formula.
    FormulaDelete {
        /// Its name.
        name: String,
    },
    /// Store (or replace) an order; its source is parsed and checked first, and its formula must
    /// be stored. A replaced order keeps its firings.
    OrderPut {
        /// Its name.
        name: String,
        /// The order's TOML (`[order]`, as Gas City writes it).
        source: String,
    },
    /// Remove a stored order.
    OrderDelete {
        /// Its name.
        name: String,
    },
    /// Fire an order now, whatever its trigger (`strand order run`).
    OrderRun {
        /// Its name.
        name: String,
    },
    /// Cook a formula into a molecule: the root and every step in this one command.
    MolCook(Cook),
    /// Route a bead (or a new one, or a convoy's open children) to an agent or a pool.
    Sling(Sling),
    /// The agent's work query with `--claim`: its in-progress bead, else claim the first ready
    /// bead assigned to it, else the first ready bead routed to its pool.
    HookClaim {
        /// The agent.
        agent: Actor,
        /// Its pool, if any.
        pool: Option<String>,
        /// A lease for a new claim, as [`Command::Claim`]'s (a bead already in progress is
        /// answered as it is).
        lease_ms: Option<u64>,
    },
    /// Send a message (from the proposal's actor).
    MailSend(MailSend),
    /// Mark a message read (adds `read`) or unread (removes it).
    MailMark {
        /// The message.
        id: BeadId,
        /// Read or unread.
        read: bool,
    },
    /// Archive (close) a message; archiving an archived message is refused.
    MailArchive {
        /// The message.
        id: BeadId,
    },
    /// Create a convoy tracking these beads (they become its children).
    ConvoyCreate {
        /// Its title.
        title: String,
        /// The tracked beads.
        children: Vec<BeadId>,
        /// Label it `owned` (no auto-close).
        owned: bool,
    },
    /// Add beads to a convoy.
    ConvoyAdd {
        /// The convoy.
        id: BeadId,
        /// The beads.
        children: Vec<BeadId>,
    },
    /// Force-close a convoy, whatever its children's state.
    ConvoyLand {
        /// The convoy.
        id: BeadId,
        /// Why.
        reason: Option<String>,
    },
    /// Close every open, not-owned convoy whose children are all closed.
    ConvoyCheck,
    /// Remove closed wisps closed more than `older_than_ms` ago (at most [`crate::limits::PURGE_BEADS_MAX`]).
    Purge {
        /// Minimum age since close, in milliseconds (0: every closed wisp).
        older_than_ms: i64,
    },
    /// Bead writes applied all together or not at all, after every condition holds.
    Txn(Txn),
    /// Beads from another store (`bd export`), ids, statuses and timestamps kept, added all
    /// together or not at all. `seq` and `revision` are assigned here; no id may exist already;
    /// a `created_at` of 0 means now.
    Import {
        /// At most [`crate::limits::IMPORT_BEADS_MAX`].
        beads: Vec<Bead>,
    },
    /// Takes beads an import wrote out again, all together or not at all, each only while still
    /// at the revision the import gave it (`strand import` when a later batch of a file is refused).
    ImportUndo {
        /// At most [`crate::limits::IMPORT_BEADS_MAX`].
        beads: Vec<ImportedBead>,
    },
    /// A change of the cluster's auth settings or tokens (`strand auth`); its namespace is ignored.
    Auth(crate::auth::AuthCommand),
    /// A command defined in a file of its own (`crate::commands`); every later command is one.
    Registered(crate::commands::RegisteredWrite),
}

/// What a leader's controller does, each conditional on the state it judged, so that applying it
/// twice is harmless. Stored in the log by its variant index: new variants go at the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerAction {
    /// Take up the controller's duties for this term: from now on, actions of lower terms are
    /// refused. A new leader proposes it before anything else.
    Begin,
    /// Expire a lease that is still the bead's current one, as last renewed at `renewed_at`.
    ExpireLease {
        /// The bead.
        id: BeadId,
        /// The lease ([`crate::model::Lease::id`]).
        lease_id: u64,
        /// The lease's renewal the leader judged past due ([`crate::model::Lease::renewed_at`]).
        renewed_at: u64,
    },
    /// Expire several leases of one namespace at once, each as [`ControllerAction::ExpireLease`]
    /// does (a lease no longer as judged is left alone), at most
    /// [`crate::limits::EXPIRIES_PER_COMMAND_MAX`].
    ExpireLeases {
        /// The leases, as judged.
        leases: Vec<JudgedLease>,
    },
    /// Remove closed wisps closed at least `older_than_ms` ago, at most
    /// [`crate::limits::PURGE_BEADS_MAX`] (the wisp GC).
    CollectWisps {
        /// The wisp TTL.
        older_than_ms: i64,
    },
    /// Close open, not owned convoys whose children are all closed.
    CheckConvoys,
    /// Fire an order whose trigger the leader judged due, having seen `seen_fired` firings:
    /// refused once the order fired since, or when the state finds it not due.
    FireOrder {
        /// The order.
        name: String,
        /// Its [`crate::order::OrderRuns::fired`] as judged.
        seen_fired: u64,
    },
}

/// A lease as the controller judged it past due: its bead, id and the renewal it saw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JudgedLease {
    /// The bead.
    pub id: BeadId,
    /// The lease ([`crate::model::Lease::id`]).
    pub lease_id: u64,
    /// Its renewal as judged ([`crate::model::Lease::renewed_at`]).
    pub renewed_at: u64,
}

/// A bead an import wrote, as [`Command::ImportUndo`] names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportedBead {
    /// Its id.
    pub id: BeadId,
    /// The revision the import gave it.
    pub revision: u64,
    /// The targets of the edges the import sent with it; any other edge it has was taken over
    /// from a loose edge, and becomes loose again.
    pub edges: Vec<BeadId>,
}

impl Command {
    /// Whether the command may be one write of a [`Txn`]: a write to beads and their edges.
    pub fn is_bead_write(&self) -> bool {
        matches!(
            self,
            Command::Create(_)
                | Command::Update(_)
                | Command::SetMetadata { .. }
                | Command::Claim { .. }
                | Command::Close { .. }
                | Command::Reopen { .. }
                | Command::Delete { .. }
                | Command::DepAdd { .. }
                | Command::DepRemove { .. }
        )
    }
}

/// A transaction (etcd's `Txn`, without an else branch): if every condition and every lease
/// fence holds, apply every write in order; if one fails or a write is refused, apply none.
///
/// A later write may name a bead an earlier `Create` of the same transaction made, as `$N`
/// (N counts writes from 0), so a whole graph of new beads and their edges is one step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Txn {
    /// Revisions beads must still be at.
    pub conditions: Vec<Condition>,
    /// Leases beads must still be held under (a holder's writes carry its lease id).
    pub fences: Vec<Fence>,
    /// The writes, at most [`crate::limits::TXN_WRITES_MAX`]; each [`Command::is_bead_write`].
    pub writes: Vec<Command>,
}

/// A lease fence of a [`Txn`]: the bead is still held under this lease (a fencing token).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fence {
    /// The bead.
    pub id: BeadId,
    /// The lease id the writer holds ([`crate::model::Lease::id`]).
    pub lease_id: u64,
}

/// A condition of a [`Txn`]: the bead exists and is still at this revision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    /// The bead.
    pub id: BeadId,
    /// Its revision when it was read ([`crate::model::Bead::revision`]).
    pub revision: u64,
}

impl Txn {
    /// One write, applied only if `id` is still at `revision` (`--if-revision`).
    pub fn conditional(id: BeadId, revision: u64, write: Command) -> Txn {
        Txn { conditions: vec![Condition { id, revision }], fences: Vec::new(), writes: vec![write] }
    }
}

/// Where a cook's formula comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FormulaSource {
    /// A formula stored in the namespace under this name.
    Named(String),
    /// The TOML source itself.
    Inline(String),
}

/// A cook: which formula, with what.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cook {
    /// The formula.
    pub formula: FormulaSource,
    /// The root's title; the formula's name when `None`.
    pub title: Option<String>,
    /// `{{var}}` values.
    pub vars: BTreeMap<String, String>,
    /// Cook a wisp (every bead ephemeral).
    pub ephemeral: bool,
}

/// A sling: what goes where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sling {
    /// An existing bead's id, or the title of a new task.
    pub subject: String,
    /// The agent, or with `pool`, the pool.
    pub target: String,
    /// Route to a pool rather than an agent.
    pub pool: bool,
    /// Cook this formula as a wisp first and route its root.
    pub formula: Option<FormulaSource>,
    /// Variables for the formula.
    pub vars: BTreeMap<String, String>,
    /// Do not wrap a single bead in an auto-convoy.
    pub no_convoy: bool,
    /// Label the auto-convoy `owned`.
    pub owned: bool,
    /// How the work merges (`direct`, `mr`, `local`), recorded as `gc.merge` metadata.
    pub merge: Option<String>,
}

/// A message to send.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailSend {
    /// The recipient; ignored for a reply (which goes to the original sender).
    pub to: String,
    /// The subject; the body's first line when empty.
    pub subject: String,
    /// The body.
    pub body: String,
    /// The message this replies to.
    pub reply_to: Option<BeadId>,
}

impl Command {
    /// A short name for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Create(_) => "create",
            Command::Update(_) => "update",
            Command::SetMetadata { .. } => "set_metadata",
            Command::Claim { .. } => "claim",
            Command::LeaseRenew { .. } => "lease_renew",
            Command::LeaseRelease { .. } => "lease_release",
            Command::Controller { .. } => "controller",
            Command::ClaimNext { .. } => "claim_next",
            Command::Close { .. } => "close",
            Command::Reopen { .. } => "reopen",
            Command::Delete { .. } => "delete",
            Command::DepAdd { .. } => "dep_add",
            Command::DepRemove { .. } => "dep_remove",
            Command::NamespaceCreate { .. } => "namespace_create",
            Command::NamespaceDelete { .. } => "namespace_delete",
            Command::NamespaceConfigure { .. } => "namespace_configure",
            Command::FormulaPut { .. } => "formula_put",
            Command::FormulaDelete { .. } => "formula_delete",
            Command::OrderPut { .. } => "order_put",
            Command::OrderDelete { .. } => "order_delete",
            Command::OrderRun { .. } => "order_run",
            Command::MolCook(_) => "mol_cook",
            Command::Sling(_) => "sling",
            Command::HookClaim { .. } => "hook_claim",
            Command::MailSend(_) => "mail_send",
            Command::MailMark { .. } => "mail_mark",
            Command::MailArchive { .. } => "mail_archive",
            Command::ConvoyCreate { .. } => "convoy_create",
            Command::ConvoyAdd { .. } => "convoy_add",
            Command::ConvoyLand { .. } => "convoy_land",
            Command::ConvoyCheck => "convoy_check",
            Command::Purge { .. } => "purge",
            Command::Txn(_) => "txn",
            Command::Import { .. } => "import",
            Command::ImportUndo { .. } => "import_undo",
            Command::Auth(auth) => auth.name(),
            Command::Registered(command) => command.name(),
        }
    }
}

impl ControllerAction {
    /// A short name for logs and checkers.
    pub fn name(&self) -> &'static str {
        match self {
            ControllerAction::Begin => "begin",
            ControllerAction::ExpireLease { .. } => "expire_lease",
            ControllerAction::ExpireLeases { .. } => "expire_leases",
            ControllerAction::CollectWisps { .. } => "collect_wisps",
            ControllerAction::CheckConvoys => "check_convoys",
            ControllerAction::FireOrder { .. } => "fire_order",
        }
    }
}

/// The fields of a new bead. The store assigns the id and times; the status is always `open`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CreateBead {
    /// Required, non-empty.
    pub title: String,
    /// Free text.
    pub description: String,
    /// Working notes.
    pub notes: String,
    /// Empty means `task`.
    pub bead_type: String,
    /// 0..=4.
    pub priority: Option<u8>,
    /// Initial assignee.
    pub assignee: String,
    /// Sender (messages).
    pub from: String,
    /// Parent bead; the child takes its prefix.
    pub parent_id: Option<BeadId>,
    /// Step id or formula name.
    pub reference: String,
    /// Ids this bead waits for, each `ID` (a `blocks` edge) or `TYPE:ID`.
    pub needs: Vec<String>,
    /// Initial labels.
    pub labels: BTreeSet<String>,
    /// Initial metadata.
    pub metadata: BTreeMap<String, String>,
    /// A wisp.
    pub ephemeral: bool,
    /// bd's `no_history` (never together with `ephemeral`).
    pub no_history: bool,
    /// Not ready before this time.
    pub defer_until: Option<Timestamp>,
    /// Ignored: a created bead is always `open` (store invariant 2). Kept so callers that send
    /// a status are accepted, as the existing stores accept them.
    pub requested_status: Option<Status>,
}

impl CreateBead {
    /// The outgoing edges its `needs` name: each `ID` a `blocks` edge, each `TYPE:ID` a `TYPE` edge.
    pub fn edges(&self) -> BTreeMap<BeadId, DepType> {
        self.needs
            .iter()
            .map(|need| match need.split_once(':') {
                Some((dep_type, bead_id)) if !dep_type.is_empty() && !bead_id.is_empty() => {
                    (BeadId(bead_id.to_string()), DepType(dep_type.to_string()))
                }
                _ => (BeadId(need.to_string()), DepType::blocks()),
            })
            .collect()
    }

    /// The bead this create makes under a given id (`create --id`, sent as an import of one):
    /// open, stamped by the cluster.
    pub fn into_bead(self, id: BeadId) -> Bead {
        Bead {
            depends_on: self.edges(),
            id,
            seq: 0,
            title: self.title,
            description: self.description,
            notes: self.notes,
            status: Status::Open,
            bead_type: self.bead_type,
            priority: self.priority,
            assignee: self.assignee,
            from: self.from,
            parent_id: self.parent_id,
            reference: self.reference,
            labels: self.labels,
            metadata: self.metadata,
            ephemeral: self.ephemeral,
            no_history: self.no_history,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
            revision: 0,
            started_at: None,
            closed_at: None,
            close_reason: None,
            defer_until: self.defer_until,
            lease: None,
            delivery_count: 0,
            counts: Default::default(),
        }
    }
}

/// Whether an import's beads are a `create --id`: a create under a given id is sent as an import
/// of one bead that [`CreateBead::into_bead`] made, without a creation time (the cluster stamps
/// it), while `strand import` stamps every bead it sends. The refusals of such an import speak of
/// the create and its `--id`, not of an import.
pub fn is_create_with_id(beads: &[Bead]) -> bool {
    matches!(beads, [bead] if bead.created_at == Timestamp(0))
}

/// Changes to one bead. `None` leaves a field unchanged.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UpdateBead {
    /// The bead.
    pub id: BeadId,
    /// New title (non-empty).
    pub title: Option<String>,
    /// New description.
    pub description: Option<String>,
    /// New notes.
    pub notes: Option<String>,
    /// Text appended to the notes on a new line (after `notes`, if both are given).
    pub append_notes: Option<String>,
    /// New status; the transition is validated.
    pub status: Option<Status>,
    /// New type.
    pub bead_type: Option<String>,
    /// New priority.
    pub priority: Option<u8>,
    /// New assignee (empty string unassigns).
    pub assignee: Option<String>,
    /// New parent (empty id string clears it).
    pub parent_id: Option<BeadId>,
    /// Labels added to the set.
    pub add_labels: BTreeSet<String>,
    /// Labels removed from the set.
    pub remove_labels: BTreeSet<String>,
    /// Per-key metadata changes; `None` removes the key.
    pub metadata: BTreeMap<String, Option<String>>,
    /// Claim the bead for this actor first, atomically with the other changes.
    pub claim_for: Option<Actor>,
    /// With `claim_for`: a lease for the claim, as [`Command::Claim`]'s.
    pub lease_ms: Option<u64>,
    /// Make the bead a wisp (`true`) or persistent (`false`).
    pub ephemeral: Option<bool>,
    /// Set or clear bd's `no_history`.
    pub no_history: Option<bool>,
}

impl UpdateBead {
    /// Whether the update names no change at all (store invariant 8: such an update changes nothing).
    pub fn is_empty(&self) -> bool {
        self.title.is_none()
            && self.description.is_none()
            && self.notes.is_none()
            && self.append_notes.is_none()
            && self.status.is_none()
            && self.bead_type.is_none()
            && self.priority.is_none()
            && self.assignee.is_none()
            && self.parent_id.is_none()
            && self.add_labels.is_empty()
            && self.remove_labels.is_empty()
            && self.metadata.is_empty()
            && self.ephemeral.is_none()
            && self.no_history.is_none()
            && self.claim_for.is_none()
    }
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
