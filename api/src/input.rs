//! The plain data that commands and queries carry and the state machine reads: a request's id,
//! a bead's fields to create or change, a cook's or a sling's arguments, a message, the filters
//! and cursors of the listings, a controller action. Each command's file (`crate::commands`)
//! wraps these in its command and says how it is validated, applied and mapped to protobuf;
//! `crate::command` and the commands' files re-export them at their former paths.
//!
//! Invariant: this module imports nothing of the command dispatch (`crate::command`,
//! `crate::commands`), so [`crate::state`] can take these values without knowing any command
//! (`tests/tests/tidy.rs`, `api_modules_import_in_layers`). Their serde encodings are those of
//! the log and the golden storage file: a field or a variant is never renamed or reordered.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::model::{Actor, Bead, BeadId, DepType, Status, Timestamp};

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
    /// With `claim_for`: a lease for the claim, as [`crate::command::Claim`]'s.
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

/// A bead an import wrote, as [`crate::command::ImportUndo`] names it.
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

/// Whether an import's beads are a `create --id`: a create under a given id is sent as an import
/// of one bead that [`CreateBead::into_bead`] made, without a creation time (the cluster stamps
/// it), while `strand import` stamps every bead it sends. The refusals of such an import speak of
/// the create and its `--id`, not of an import.
pub fn is_create_with_id(beads: &[Bead]) -> bool {
    matches!(beads, [bead] if bead.created_at == Timestamp(0))
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
    /// Raise the state's apply version from `from` to `to` (see [`crate::version`]): the leader
    /// proposes it once every member's build applies `to`. Refused once the version is no longer
    /// `from`, while it is pinned, or when `to` is not above it.
    SwitchApplyVersion {
        /// The apply version the leader judged current.
        from: u32,
        /// The version to apply from the next entry on.
        to: u32,
    },
    /// A consistency checkpoint: every replica takes a digest of its state as it applies it, and
    /// the leader compares the members' digests at its index. It changes nothing.
    Checkpoint,
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
            ControllerAction::SwitchApplyVersion { .. } => "switch_apply_version",
            ControllerAction::Checkpoint => "checkpoint",
        }
    }
}
