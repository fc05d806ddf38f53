//! The storage format, pinned: every type Strand stores on disk or sends to another node is
//! encoded here from a hand-built sample (no randomness, no clock), and the bytes are compared
//! with `tests/golden/storage-format.txt`, one `NAME HEX` line per sample, under the line
//! `storage format N` (N is `raft_store::codec::STORAGE_FORMAT`).
//!
//! postcard writes an enum's variant by its index and a struct's fields in order, without names,
//! so the rules are:
//! - A new enum variant goes at the END of its enum. Appending one needs no format bump (older
//!   bytes still decode the same), only a regenerated golden file that holds its new sample.
//! - Changing a type's layout — inserting a variant anywhere but at the end, removing or
//!   reordering variants, adding, removing, retyping or reordering fields — changes bytes that
//!   are already stored: that is a storage format change. Bump `STORAGE_FORMAT` in
//!   `raft-store/src/codec.rs` (and say what changed in its doc comment), then regenerate.
//!
//! Regenerate with `STRAND_REGENERATE_FORMAT=1 cargo nextest run --workspace -E
//! 'binary(storage_format)'`. Regeneration refuses while an existing entry's bytes changed or an
//! entry disappeared and the golden file's format number is still `STORAGE_FORMAT`; once
//! `STORAGE_FORMAT` is higher, it rewrites every entry under the new number.
//!
//! A sample is named by its enum's own name function where `api` has one (`Command::name`,
//! `Status::as_str`...), else by an exhaustive `match` here (no wildcard arm);
//! `every_variant_of_every_sampled_enum_has_a_sample` counts each enum's variants from its
//! decoder, so a new variant without a sample fails.
//!
//! Values the storage layer seals (log entries, the vote and other meta values, state records,
//! the log mark, snapshot records) are pinned as written, with their CRC-32; their parts
//! (proposals, answers, beads, tokens) and record keys are pinned bare, as `codec::encode_plain`
//! writes them; peer messages as `node::peer::network::encode` sends them; the backup header as
//! `raft_store::backup::encode_header` writes it (JSON); a whole snapshot file as
//! `raft_store::snapshot::SnapshotWriter` writes it.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use api::auth::{AuthCommand, Role, Token, TokenInfo};
use api::command::{Command, ControllerAction, FormulaSource, Proposal, RequestId};
use api::commands::RegisteredAnswer;
use api::commands::samples::{FORMULA, ORDER, ann, at, bead, bead_id, create_bead, rig, token_hash};
use api::model::{Actor, DepType, Dependency, Event, Namespace, Status};
use api::order::OrderRuns;
use api::outcome::{Answer, FormulaInfo, NamespaceInfo, OrderInfo, Outcome, Progress, Refusal};
use api::printable::hex;
use api::state::{NamespaceMeta, OrderRecord, Record, RecordKey, RecordRef, Session};
use node::leader::{BeadWrite, LeaderRequest};
use node::peer::{
    ChangeRefused, Changed, JoinRequest, Joined, MemberChange, MoveLeader, MoveRefused, Moved, ReadIndex, Removed,
};
use node::standing::RemovedRecord;
use openraft::raft::linearizable_read::ReadLogId;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendError, StreamAppendResult,
    TransferLeaderRequest, TransferLeaderResponse, VoteRequest, VoteResponse,
};
use openraft::type_config::alias::EntryPayloadOf;
use openraft::{EntryPayload, Membership};
use raft_store::backup::{BackupHeader, encode_header};
use raft_store::codec::{self, STORAGE_FORMAT};
use raft_store::snapshot::SnapshotWriter;
use raft_store::types::{Entry, LogId, Member, SnapshotMeta, StoredMembership, TypeConfig, Vote};

/// The environment variable that makes the golden test rewrite the golden file.
const REGENERATE_VAR: &str = "STRAND_REGENERATE_FORMAT";
/// How to regenerate the golden file, as the failure messages say it.
const REGENERATE: &str = "`STRAND_REGENERATE_FORMAT=1 cargo nextest run --workspace -E 'binary(storage_format)'`";
/// What starts the format line of the golden file.
const FORMAT_LINE: &str = "storage format ";

/// The golden file.
fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden").join("storage-format.txt")
}

/// A value as postcard writes it, without a checksum (record keys, and the parts of stored values).
macro_rules! plain {
    ($value:expr) => {
        codec::encode_plain(&$value).unwrap()
    };
}

/// A value as the storage layer writes it: postcard, then its CRC-32 (`codec::encode`).
macro_rules! sealed {
    ($value:expr) => {
        codec::encode(&$value).unwrap()
    };
}

/// A message as the peer plane sends it (`node::peer::network::encode`).
macro_rules! peer {
    ($value:expr) => {
        node::peer::network::encode(&$value).data
    };
}

// ---------------------------------------------------------------------------------------------
// The samples' parts, every field set to a value other than its default where the type allows.

fn token() -> Token {
    Token {
        name: "ci".into(),
        hash: token_hash(),
        role: Role::Agent,
        namespaces: BTreeSet::from([rig(), Namespace("web".into())]),
        actor: Actor("ci-bot".into()),
        created_at: at(1),
    }
}

fn event() -> Event {
    Event {
        seq: 12,
        event_type: "bead.claimed".into(),
        timestamp: at(3),
        actor: "ann".into(),
        subject: "st-7".into(),
        message: "Ship the release".into(),
    }
}

fn namespace_meta() -> NamespaceMeta {
    NamespaceMeta {
        prefix: "rg".into(),
        next_seq: 8,
        next_event_seq: 13,
        compacted_through: 2,
        default_lease_ms: Some(45_000),
        max_deliveries: 7,
    }
}

fn order_record() -> OrderRecord {
    OrderRecord {
        source: ORDER.into(),
        runs: OrderRuns {
            fired: 3,
            last_fired_at: Some(at(6)),
            last_window: 29_454_000,
            last_run: Some("st-9".into()),
        },
    }
}

/// A dedup-table session: a success and a refusal.
fn session() -> Session {
    Session {
        answers: BTreeMap::from([
            (3, Ok(Outcome::Done)),
            (4, Err(Refusal::AlreadyClaimed { id: bead_id(1), holder: "bob".into() })),
        ]),
        floor: 3,
        last_active: at(9),
    }
}

/// A proposal carrying `command`, every envelope field set.
fn proposal(command: Command) -> Proposal {
    Proposal {
        request_id: Some(RequestId { client_id: 0x1234_5678_9abc_def0, request_seq: 5, lowest_unacked: 3 }),
        timestamp: at(7),
        default_prefix: "rg".into(),
        namespace: rig(),
        actor: ann(),
        event_retention: 1_000,
        credential: Some(token_hash()),
        command,
    }
}

fn member(id: u64) -> Member {
    Member { addr: format!("10.0.0.{id}:7001"), client_addr: format!("10.0.0.{id}:7000"), auto_promote: id == 4 }
}

fn log_id() -> LogId {
    LogId::new_term_index(3, 7)
}

fn vote() -> Vote {
    Vote::new(3, 2)
}

fn committed_vote() -> Vote {
    Vote::new_committed(3, 2)
}

/// Voters 1, 2 and 3, and learner 4.
fn membership() -> Membership<u64, Member> {
    Membership::new(vec![BTreeSet::from([1, 2, 3])], (1..=4).map(|id| (id, member(id))).collect::<BTreeMap<_, _>>())
        .unwrap()
}

fn stored_membership() -> StoredMembership {
    StoredMembership::new(Some(LogId::new_term_index(2, 4)), membership())
}

fn snapshot_meta() -> SnapshotMeta {
    SnapshotMeta { last_log_id: Some(log_id()), last_membership: stored_membership() }
}

fn entry(payload: EntryPayloadOf<TypeConfig>) -> Entry {
    Entry { log_id: log_id(), payload }
}

fn changed() -> Changed {
    Changed {
        index: 9,
        members: (1..=4).map(|id| (id, member(id))).collect(),
        voters: BTreeSet::from([1, 2, 3]),
        leader: 2,
    }
}

// ---------------------------------------------------------------------------------------------
// One value of every variant of every sampled enum.

/// The controller actions the commands' samples hold (one per action).
fn controller_actions() -> Vec<ControllerAction> {
    commands()
        .into_iter()
        .filter_map(|command| match command {
            Command::Controller(controller) => Some(controller.action),
            _ => None,
        })
        .collect()
}

/// The auth commands the commands' samples hold (one per kind).
fn auth_commands() -> Vec<AuthCommand> {
    commands()
        .into_iter()
        .filter_map(|command| match command {
            Command::Auth(auth) => Some(auth),
            _ => None,
        })
        .collect()
}

fn formula_sources() -> Vec<FormulaSource> {
    vec![FormulaSource::Named("release".into()), FormulaSource::Inline(FORMULA.into())]
}

/// Every command, in index order: each command file's samples (`api::commands`), one per
/// variant, one `Controller` per controller action and one `Auth` per auth command. A new command
/// needs no line here.
fn commands() -> Vec<Command> {
    Command::samples()
}

fn record_keys() -> Vec<RecordKey> {
    vec![
        RecordKey::Clock,
        RecordKey::ControllerTerm,
        RecordKey::Namespace(rig()),
        RecordKey::Bead(rig(), bead_id(7)),
        RecordKey::Session(0x1234_5678_9abc_def0),
        RecordKey::Event(rig(), 12),
        RecordKey::Formula(rig(), "release".into()),
        RecordKey::LooseEdges(rig(), bead_id(8)),
        RecordKey::Order(rig(), "nightly".into()),
        RecordKey::AuthEnabled,
        RecordKey::Token("ci".into()),
        RecordKey::ApplyVersion,
    ]
}

fn records() -> Vec<Record> {
    vec![
        Record::Clock(at(9)),
        Record::ControllerTerm(9),
        Record::Namespace(namespace_meta()),
        Record::Bead(Box::new(bead())),
        Record::Session(session()),
        Record::Event(event()),
        Record::Formula(FORMULA.into()),
        Record::LooseEdges(BTreeMap::from([(bead_id(8), DepType::blocks()), (bead_id(9), DepType("related".into()))])),
        Record::Order(order_record()),
        Record::AuthEnabled(true),
        Record::Token(token()),
        Record::ApplyVersion(api::state::ApplyVersionRecord { version: 2, pinned: true, since: 4096 }),
    ]
}

fn refusals() -> Vec<Refusal> {
    vec![
        Refusal::NotFound(bead_id(1)),
        Refusal::AlreadyClaimed { id: bead_id(1), holder: "bob".into() },
        Refusal::NotClaimable { id: bead_id(1), status: Status::Closed },
        Refusal::InvalidTransition {
            id: bead_id(1),
            from: Status::Closed,
            to: Status::InProgress,
            allowed: "open".into(),
        },
        Refusal::Invalid("unknown dependency type x".into()),
        Refusal::TooLarge { what: "title".into(), size: 1_025, limit: 1_024 },
        Refusal::TooManyResults { limit: 10_000 },
        Refusal::UnfilteredList,
        Refusal::SessionExpired { client_id: 77, request_seq: 5 },
        Refusal::Compacted { requested: 2, compacted: 10 },
        Refusal::RevisionMismatch { id: bead_id(1), expected: 41, current: 42 },
        Refusal::LeaseLost {
            id: bead_id(1),
            lease_id: 41,
            holder: "bob".into(),
            current: Some(43),
            status: Status::InProgress,
        },
        Refusal::NotLeaseHolder { id: bead_id(1), holder: "bob".into() },
        Refusal::StaleControllerTerm { term: 8, current: 9 },
        Refusal::TxnWriteRefused { index: 1, refusal: Box::new(Refusal::NotFound(bead_id(9))) },
        Refusal::Unauthenticated("no token".into()),
        Refusal::PermissionDenied("the reader role only reads".into()),
        Refusal::RequestTooOld { client_id: 77, request_seq: 2 },
        Refusal::NamespaceNotFound { namespace: "rgi".into(), closest: Some("rig".into()) },
        Refusal::NotHolder { id: bead_id(1), holder: "carol".into(), actor: "dave".into(), status: Status::InProgress },
    ]
}

fn outcomes() -> Vec<Outcome> {
    vec![
        Outcome::Bead(Box::new(bead())),
        Outcome::Beads(vec![bead()]),
        Outcome::Dependencies(vec![Dependency {
            issue_id: bead_id(1),
            depends_on_id: bead_id(2),
            dep_type: DepType::blocks(),
        }]),
        Outcome::Done,
        Outcome::Events { events: vec![event()], last_seq: 12 },
        Outcome::Progress(Box::new(Progress { root: bead(), children: vec![bead()], current: Some(bead_id(7)) })),
        Outcome::Purged { purged_count: 3 },
        Outcome::Formulas(vec![FormulaInfo {
            name: "release".into(),
            description: "Cut a release".into(),
            steps: 2,
            source: FORMULA.into(),
        }]),
        Outcome::Orders(vec![OrderInfo {
            name: "nightly".into(),
            description: "Every night".into(),
            formula: "release".into(),
            trigger: "cooldown 24h0m0s".into(),
            target: "pool:web".into(),
            enabled: true,
            fired: 3,
            last_fired_at: Some(at(6)),
            last_window: 29_454_000,
            last_run: "st-9".into(),
            next_due_ms: Some(1_767_312_000_000),
            error: "no such formula".into(),
            source: ORDER.into(),
        }]),
        Outcome::Namespaces(vec![NamespaceInfo {
            name: "rig".into(),
            prefix: "rg".into(),
            beads: 7,
            last_event_seq: 12,
            default_lease_ms: Some(45_000),
            max_deliveries: 7,
        }]),
        Outcome::Txn(vec![Outcome::Done, Outcome::Purged { purged_count: 1 }]),
        Outcome::Tokens { enabled: true, tokens: vec![TokenInfo::from(&token())] },
    ]
    .into_iter()
    .chain(RegisteredAnswer::samples().into_iter().map(Outcome::Registered))
    .collect()
}

fn statuses() -> Vec<Status> {
    Status::ALL.to_vec()
}

fn roles() -> Vec<Role> {
    vec![Role::Admin, Role::Agent, Role::Reader]
}

fn entry_payloads() -> Vec<EntryPayloadOf<TypeConfig>> {
    let claim = Command::Claim(api::command::Claim { id: bead_id(1), actor: ann(), lease_ms: Some(30_000) });
    vec![EntryPayload::Blank, EntryPayload::Normal(Arc::new(proposal(claim))), EntryPayload::Membership(membership())]
}

fn leader_requests() -> Vec<LeaderRequest> {
    vec![LeaderRequest::Write(BeadWrite {
        namespace: rig(),
        request_id: RequestId { client_id: 0x1234_5678_9abc_def0, request_seq: 5, lowest_unacked: 3 },
        actor: ann(),
        prefix: Some("rg".into()),
        command: Command::Create(create_bead()),
        credential: Some(token_hash()),
    })]
}

fn member_changes() -> Vec<MemberChange> {
    vec![MemberChange::Add { id: 4, member: member(4), join: true }, MemberChange::Promote(4), MemberChange::Remove(3)]
}

fn move_refusals() -> Vec<MoveRefused> {
    vec![
        MoveRefused::Unknown("no member 9".into()),
        MoveRefused::NotReady("node 4 is a learner".into()),
        MoveRefused::Unavailable("no leader".into()),
        MoveRefused::Timeout("node 3 did not lead in time".into()),
    ]
}

fn change_refusals() -> Vec<ChangeRefused> {
    vec![
        ChangeRefused::Unknown("no member 9".into()),
        ChangeRefused::Exists("node 4 exists".into()),
        ChangeRefused::NotReady("another change is in progress".into()),
        ChangeRefused::Denied("another cluster".into()),
        ChangeRefused::Unavailable("no leader".into()),
        ChangeRefused::Invalid("an id of 0".into()),
        ChangeRefused::NotFormed("no cluster yet".into()),
    ]
}

fn append_entries_responses() -> Vec<AppendEntriesResponse<TypeConfig>> {
    vec![
        AppendEntriesResponse::Success,
        AppendEntriesResponse::PartialSuccess(Some(log_id())),
        AppendEntriesResponse::Conflict,
        AppendEntriesResponse::HigherVote(Vote::new(4, 3)),
    ]
}

fn stream_append_errors() -> Vec<StreamAppendError<TypeConfig>> {
    vec![StreamAppendError::Conflict(log_id()), StreamAppendError::HigherVote(Vote::new(4, 3))]
}

// ---------------------------------------------------------------------------------------------
// Sample names: the api's own name functions where they exist, else an exhaustive `match` per
// enum, no wildcard arm.

/// A command's sample name: its own, with its controller action's or auth command's.
fn command_sample_name(command: &Command) -> String {
    match command {
        Command::Controller(controller) => format!("controller/{}", controller.action.name()),
        Command::Auth(auth) => format!("auth/{}", auth.name()),
        other => other.name().to_string(),
    }
}

fn formula_source_name(source: &FormulaSource) -> &'static str {
    match source {
        FormulaSource::Named(_) => "named",
        FormulaSource::Inline(_) => "inline",
    }
}

fn record_key_name(key: &RecordKey) -> &'static str {
    match key {
        RecordKey::Clock => "clock",
        RecordKey::ControllerTerm => "controller_term",
        RecordKey::Namespace(_) => "namespace",
        RecordKey::Bead(..) => "bead",
        RecordKey::Session(_) => "session",
        RecordKey::Event(..) => "event",
        RecordKey::Formula(..) => "formula",
        RecordKey::LooseEdges(..) => "loose_edges",
        RecordKey::Order(..) => "order",
        RecordKey::AuthEnabled => "auth_enabled",
        RecordKey::Token(_) => "token",
        RecordKey::ApplyVersion => "apply_version",
    }
}

fn record_name(record: &Record) -> &'static str {
    match record {
        Record::Clock(_) => "clock",
        Record::ControllerTerm(_) => "controller_term",
        Record::Namespace(_) => "namespace",
        Record::Bead(_) => "bead",
        Record::Session(_) => "session",
        Record::Event(_) => "event",
        Record::Formula(_) => "formula",
        Record::LooseEdges(_) => "loose_edges",
        Record::Order(_) => "order",
        Record::AuthEnabled(_) => "auth_enabled",
        Record::Token(_) => "token",
        Record::ApplyVersion(_) => "apply_version",
    }
}

/// The borrowed form the storage layer encodes a record through (`State::changed_records`).
fn record_ref(record: &Record) -> RecordRef<'_> {
    match record {
        Record::Clock(clock) => RecordRef::Clock(*clock),
        Record::ControllerTerm(term) => RecordRef::ControllerTerm(*term),
        Record::Namespace(meta) => RecordRef::Namespace(meta),
        Record::Bead(bead) => RecordRef::Bead(bead),
        Record::Session(session) => RecordRef::Session(session),
        Record::Event(event) => RecordRef::Event(event),
        Record::Formula(source) => RecordRef::Formula(source),
        Record::LooseEdges(edges) => RecordRef::LooseEdges(edges),
        Record::Order(order) => RecordRef::Order(order),
        Record::AuthEnabled(enabled) => RecordRef::AuthEnabled(*enabled),
        Record::Token(token) => RecordRef::Token(token),
        Record::ApplyVersion(versions) => RecordRef::ApplyVersion(*versions),
    }
}

fn refusal_name(refusal: &Refusal) -> &'static str {
    match refusal {
        Refusal::NotFound(_) => "not_found",
        Refusal::AlreadyClaimed { .. } => "already_claimed",
        Refusal::NotClaimable { .. } => "not_claimable",
        Refusal::InvalidTransition { .. } => "invalid_transition",
        Refusal::Invalid(_) => "invalid",
        Refusal::TooLarge { .. } => "too_large",
        Refusal::TooManyResults { .. } => "too_many_results",
        Refusal::UnfilteredList => "unfiltered_list",
        Refusal::SessionExpired { .. } => "session_expired",
        Refusal::Compacted { .. } => "compacted",
        Refusal::RevisionMismatch { .. } => "revision_mismatch",
        Refusal::LeaseLost { .. } => "lease_lost",
        Refusal::NotLeaseHolder { .. } => "not_lease_holder",
        Refusal::StaleControllerTerm { .. } => "stale_controller_term",
        Refusal::TxnWriteRefused { .. } => "txn_write_refused",
        Refusal::Unauthenticated(_) => "unauthenticated",
        Refusal::PermissionDenied(_) => "permission_denied",
        Refusal::RequestTooOld { .. } => "request_too_old",
        Refusal::NamespaceNotFound { .. } => "namespace_not_found",
        Refusal::NotHolder { .. } => "not_holder",
    }
}

fn outcome_name(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Bead(_) => "bead",
        Outcome::Beads(_) => "beads",
        Outcome::Dependencies(_) => "dependencies",
        Outcome::Done => "done",
        Outcome::Events { .. } => "events",
        Outcome::Progress(_) => "progress",
        Outcome::Purged { .. } => "purged",
        Outcome::Formulas(_) => "formulas",
        Outcome::Orders(_) => "orders",
        Outcome::Namespaces(_) => "namespaces",
        Outcome::Txn(_) => "txn",
        Outcome::Tokens { .. } => "tokens",
        Outcome::Registered(answer) => return format!("registered/{}", answer.name()),
    }
    .to_string()
}

fn entry_payload_name(payload: &EntryPayloadOf<TypeConfig>) -> &'static str {
    match payload {
        EntryPayload::Blank => "blank",
        EntryPayload::Normal(_) => "normal",
        EntryPayload::Membership(_) => "membership",
    }
}

fn leader_request_name(request: &LeaderRequest) -> &'static str {
    match request {
        LeaderRequest::Write(_) => "write",
    }
}

fn member_change_name(change: &MemberChange) -> &'static str {
    match change {
        MemberChange::Add { .. } => "add",
        MemberChange::Promote(_) => "promote",
        MemberChange::Remove(_) => "remove",
    }
}

fn move_refused_name(refused: &MoveRefused) -> &'static str {
    match refused {
        MoveRefused::Unknown(_) => "unknown",
        MoveRefused::NotReady(_) => "not_ready",
        MoveRefused::Unavailable(_) => "unavailable",
        MoveRefused::Timeout(_) => "timeout",
    }
}

fn change_refused_name(refused: &ChangeRefused) -> &'static str {
    match refused {
        ChangeRefused::Unknown(_) => "unknown",
        ChangeRefused::Exists(_) => "exists",
        ChangeRefused::NotReady(_) => "not_ready",
        ChangeRefused::Denied(_) => "denied",
        ChangeRefused::Unavailable(_) => "unavailable",
        ChangeRefused::Invalid(_) => "invalid",
        ChangeRefused::NotFormed(_) => "not_formed",
    }
}

fn append_entries_response_name(response: &AppendEntriesResponse<TypeConfig>) -> &'static str {
    match response {
        AppendEntriesResponse::Success => "success",
        AppendEntriesResponse::PartialSuccess(_) => "partial_success",
        AppendEntriesResponse::Conflict => "conflict",
        AppendEntriesResponse::HigherVote(_) => "higher_vote",
    }
}

fn stream_append_error_name(error: &StreamAppendError<TypeConfig>) -> &'static str {
    match error {
        StreamAppendError::Conflict(_) => "conflict",
        StreamAppendError::HigherVote(_) => "higher_vote",
    }
}

// ---------------------------------------------------------------------------------------------
// The samples.

/// Named encodings, in the golden file's order.
#[derive(Default)]
struct Samples(Vec<(String, Vec<u8>)>);

impl Samples {
    fn add(&mut self, name: impl Into<String>, bytes: Vec<u8>) {
        self.0.push((name.into(), bytes));
    }
}

/// Every sample: a name and the bytes as Strand writes them.
fn samples() -> Vec<(String, Vec<u8>)> {
    let mut samples = Samples::default();

    // The Raft log: proposals (the payload of a normal entry), one per command.
    for command in commands() {
        let name = format!("proposal/{}", command_sample_name(&command));
        samples.add(name, plain!(proposal(command)));
    }
    for source in formula_sources() {
        samples.add(format!("formula_source/{}", formula_source_name(&source)), plain!(source));
    }
    for status in statuses() {
        samples.add(format!("status/{}", status.as_str()), plain!(status));
    }
    for role in roles() {
        samples.add(format!("role/{}", role.name()), plain!(role));
    }
    for payload in entry_payloads() {
        let name = format!("log/entry/{}", entry_payload_name(&payload));
        samples.add(name, sealed!(entry(payload)));
    }
    samples.add("log/key", codec::log_key(0x0102_0304_0506_0708));
    samples.add("log/mark", sealed!(Some(7u64)));

    // The state: keys bare, records sealed, and the parts that records and answers hold.
    for key in record_keys() {
        samples.add(format!("state/key/{}", record_key_name(&key)), plain!(key));
    }
    for record in records() {
        samples.add(format!("state/record/{}", record_name(&record)), sealed!(record));
    }
    for refusal in refusals() {
        samples.add(format!("refusal/{}", refusal_name(&refusal)), plain!(refusal));
    }
    for outcome in outcomes() {
        samples.add(format!("outcome/{}", outcome_name(&outcome)), plain!(outcome));
    }
    samples.add("session", plain!(session()));
    samples.add("bead", plain!(bead()));
    samples.add("event", plain!(event()));
    samples.add("namespace_meta", plain!(namespace_meta()));
    samples.add("order_record", plain!(order_record()));
    samples.add("token", plain!(token()));

    // The meta space: its keys and values.
    let meta_keys: [(&str, &[u8]); 13] = [
        ("vote", codec::META_VOTE),
        ("committed", codec::META_COMMITTED),
        ("purged", codec::META_PURGED),
        ("applied", codec::META_APPLIED),
        ("membership", codec::META_MEMBERSHIP),
        ("installing", codec::META_INSTALLING),
        ("identity", codec::META_IDENTITY),
        ("format", codec::META_FORMAT),
        ("joined", node::standing::META_JOINED),
        ("removed", node::standing::META_REMOVED),
        ("rejoining", node::rejoin::META_REJOINING),
        ("seen", node::standing::META_SEEN),
        ("closed_index", codec::META_CLOSED_INDEX),
    ];
    for (name, key) in meta_keys {
        samples.add(format!("meta/key/{name}"), key.to_vec());
    }
    // The closed_index space: each listing's entry key of one closed bead (its values are empty).
    let mut closed = api::input::CreateBead {
        title: "t".into(),
        bead_type: "task".into(),
        assignee: "ann".into(),
        parent_id: Some(api::model::BeadId("st-1".into())),
        labels: ["l".to_string()].into(),
        ..Default::default()
    }
    .into_bead(api::model::BeadId("st-2".into()));
    (closed.created_at, closed.seq) = (api::model::Timestamp(1_700_000_000_000), 2);
    let entries = api::state::closed_index::entries(&Namespace("default".into()), &closed);
    for (name, entry) in ["all", "type", "assignee", "label", "parent"].into_iter().zip(entries) {
        samples.add(format!("closed_index/key/{name}"), entry);
    }
    samples.add("meta/vote", sealed!(vote()));
    samples.add("meta/vote_committed", sealed!(committed_vote()));
    samples.add("meta/committed", sealed!(Some(log_id())));
    samples.add("meta/purged", sealed!(log_id()));
    samples.add("meta/applied", sealed!(Some(log_id())));
    samples.add("meta/membership", sealed!(stored_membership()));
    samples.add("meta/format", plain!(STORAGE_FORMAT));
    samples.add(
        "meta/identity",
        sealed!(node::Identity { cluster_name: "prod".into(), node_id: 3, cluster_id: 0x0bad_cafe_f00d_beef }),
    );
    samples.add("meta/joined", sealed!(Joined { cluster_id: 0x0bad_cafe_f00d_beef, membership: changed() }));
    samples.add(
        "meta/removed",
        sealed!(RemovedRecord {
            cluster_name: "prod".into(),
            cluster_id: 0x0bad_cafe_f00d_beef,
            node_id: 3,
            index: 9,
            by: 2
        }),
    );
    samples.add(
        "meta/seen",
        sealed!(node::standing::Seen { index: 9, members: [1, 2, 4].into(), former: [(3, 9)].into() }),
    );
    samples.add("member", plain!(member(4)));
    samples.add("log_id", plain!(log_id()));
    samples.add("vote", plain!(committed_vote()));

    // Snapshots and backups.
    samples.add("snapshot/meta", sealed!(snapshot_meta()));
    samples.add("snapshot/file", snapshot_file());
    samples.add(
        "backup/header",
        encode_header(&BackupHeader {
            storage_format: STORAGE_FORMAT,
            cluster_id: 0x0bad_cafe_f00d_beef,
            node_id: 2,
            last_log_index: 7,
            last_log_term: 3,
            created_ms: 1_767_225_600_000,
            snapshot_bytes: 4_096,
            snapshot_crc32: 0xdead_beef,
        }),
    );

    // Between nodes: what the peer plane sends and answers.
    for request in leader_requests() {
        samples.add(format!("peer/leader_request/{}", leader_request_name(&request)), peer!(request));
    }
    let answer: Answer = Err(Refusal::NotFound(bead_id(1)));
    samples.add("peer/propose_answer", peer!(Ok::<Answer, String>(answer)));
    samples.add("peer/remote_error", peer!(Err::<Answer, String>("this node is not the leader".into())));
    let read_log_id: ReadLogId<TypeConfig> = postcard::from_bytes(&plain!(log_id())).unwrap();
    let read_index: ReadIndex = (2, read_log_id, Some(LogId::new_term_index(3, 6)));
    samples.add("peer/read_index", peer!(Ok::<ReadIndex, String>(read_index)));
    samples.add("peer/move_leader", peer!(MoveLeader { to: 3, timeout_ms: 5_000 }));
    samples.add("peer/moved", peer!(Ok::<Moved, MoveRefused>(Moved { from: 2, to: 3, term: 4 })));
    for refused in move_refusals() {
        samples.add(
            format!("peer/move_refused/{}", move_refused_name(&refused)),
            peer!(Err::<Moved, MoveRefused>(refused)),
        );
    }
    for change in member_changes() {
        samples.add(format!("peer/member_change/{}", member_change_name(&change)), peer!(change));
    }
    samples.add("peer/changed", peer!(Ok::<Changed, ChangeRefused>(changed())));
    for refused in change_refusals() {
        let name = format!("peer/change_refused/{}", change_refused_name(&refused));
        samples.add(name, peer!(Err::<Changed, ChangeRefused>(refused)));
    }
    samples.add("peer/join_request", peer!(JoinRequest { cluster_name: "prod".into(), id: 4, member: member(4) }));
    let joined = Joined { cluster_id: 0x0bad_cafe_f00d_beef, membership: changed() };
    samples.add("peer/joined", peer!(Ok::<Joined, ChangeRefused>(joined)));
    samples.add("peer/removed", peer!(Removed { index: 9, by: 2 }));
    let vote_request =
        VoteRequest::<TypeConfig> { vote: vote(), last_log_id: Some(log_id()), leadership_transfer: true };
    samples.add("peer/vote_request", peer!(vote_request));
    let vote_response = VoteResponse::<TypeConfig> { vote: vote(), vote_granted: true, last_log_id: Some(log_id()) };
    samples.add("peer/vote_response", peer!(Ok::<VoteResponse<TypeConfig>, String>(vote_response)));
    let claim = Command::Claim(api::command::Claim { id: bead_id(1), actor: ann(), lease_ms: Some(30_000) });
    let append = AppendEntriesRequest::<TypeConfig> {
        vote: committed_vote(),
        prev_log_id: Some(LogId::new_term_index(3, 6)),
        entries: vec![entry(EntryPayload::Normal(Arc::new(proposal(claim))))],
        leader_commit: Some(LogId::new_term_index(3, 5)),
    };
    samples.add("peer/append_entries_request", peer!(append));
    for response in append_entries_responses() {
        let name = format!("peer/append_entries_response/{}", append_entries_response_name(&response));
        samples.add(name, peer!(Ok::<AppendEntriesResponse<TypeConfig>, String>(response)));
    }
    let appended: StreamAppendResult<TypeConfig> = Ok(Some(log_id()));
    samples.add("peer/stream_append/appended", peer!(Ok::<StreamAppendResult<TypeConfig>, String>(appended)));
    for error in stream_append_errors() {
        let name = format!("peer/stream_append/{}", stream_append_error_name(&error));
        samples.add(name, peer!(Ok::<StreamAppendResult<TypeConfig>, String>(Err(error))));
    }
    samples.add(
        "peer/transfer_leader_request",
        peer!(TransferLeaderRequest::<TypeConfig>::new(committed_vote(), 3, Some(log_id()))),
    );
    let transferred: TransferLeaderResponse<TypeConfig> = Ok(());
    samples.add("peer/transfer_leader_response", peer!(Ok::<TransferLeaderResponse<TypeConfig>, String>(transferred)));
    // The first chunk of a snapshot stream carries the vote and the metadata (`PeerClient::snapshot_chunks`).
    samples.add("peer/snapshot_header", postcard::to_stdvec(&(committed_vote(), snapshot_meta())).unwrap());
    let snapshot_response = SnapshotResponse::<TypeConfig>::new(vote());
    samples.add("peer/snapshot_response", peer!(Ok::<SnapshotResponse<TypeConfig>, String>(snapshot_response)));

    samples.0
}

/// A whole snapshot file of two records, as the state machine writes one.
fn snapshot_file() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("golden.snapshot");
    let mut writer = SnapshotWriter::create(&path, &snapshot_meta()).unwrap();
    writer.record(&plain!(RecordKey::Clock), &sealed!(Record::Clock(at(9)))).unwrap();
    writer.record(&plain!(RecordKey::Namespace(rig())), &sealed!(Record::Namespace(namespace_meta()))).unwrap();
    writer.finish().unwrap();
    std::fs::read(&path).unwrap()
}

/// The samples with their bytes in hex, as the golden file holds them.
fn hex_samples() -> Vec<(String, String)> {
    samples().into_iter().map(|(name, bytes)| (name, hex(&bytes))).collect()
}

// ---------------------------------------------------------------------------------------------
// The golden file and the rules, as pure functions.

/// The golden file, read.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Golden {
    /// The storage format it pins.
    format: u32,
    /// Sample name to hex, in the file's order.
    entries: Vec<(String, String)>,
}

impl Golden {
    fn map(&self) -> BTreeMap<String, String> {
        self.entries.iter().cloned().collect()
    }
}

/// Reads the golden file's text: `#` comments and blank lines, the format line, then one
/// `NAME HEX` line per sample.
fn parse_golden(text: &str) -> Result<Golden, String> {
    let mut lines = text.lines().map(str::trim).filter(|line| !line.is_empty() && !line.starts_with('#'));
    let format_line = lines.next().ok_or("the golden file has no `storage format N` line")?;
    let format = format_line
        .strip_prefix(FORMAT_LINE)
        .and_then(|number| number.parse().ok())
        .ok_or_else(|| format!("the golden file starts with {format_line:?}, not `storage format N`"))?;
    let mut entries = Vec::new();
    let mut seen = BTreeSet::new();
    for line in lines {
        // An empty encoding is written `NAME ` and read back without its trailing space.
        let (name, bytes) = line.split_once(' ').unwrap_or((line, ""));
        let bytes = bytes.trim();
        if bytes.len() % 2 != 0 || !bytes.bytes().all(|byte| byte.is_ascii_hexdigit()) {
            return Err(format!("golden line {line:?} is not `NAME HEX`"));
        }
        if !seen.insert(name.to_string()) {
            return Err(format!("the golden file names {name} twice"));
        }
        entries.push((name.to_string(), bytes.to_string()));
    }
    Ok(Golden { format, entries })
}

/// The golden file's text for `samples` under `format`.
fn render_golden(format: u32, samples: &[(String, String)]) -> String {
    let mut text = String::from(
        "# Strand's storage format, pinned: the bytes of a hand-built sample of every type (and every enum\n\
         # variant) a node stores on disk or sends to another node, as `NAME HEX`, under the format number\n\
         # raft_store::codec::STORAGE_FORMAT. Written and checked by tests/tests/storage_format.rs, whose\n\
         # header gives the rules: a new variant goes at the end of its enum; changing bytes already here\n\
         # needs a bump of STORAGE_FORMAT. Regenerate with\n\
         # STRAND_REGENERATE_FORMAT=1 cargo nextest run --workspace -E 'binary(storage_format)'\n",
    );
    text.push_str(&format!("{FORMAT_LINE}{format}\n"));
    for (name, bytes) in samples {
        text.push_str(&format!("{name} {bytes}\n"));
    }
    text
}

/// How the samples differ from the golden entries.
#[derive(Debug, Default, PartialEq, Eq)]
struct Comparison {
    /// In both, with other bytes: name, golden bytes, new bytes.
    changed: Vec<(String, String, String)>,
    /// In the golden file only: name, golden bytes.
    removed: Vec<(String, String)>,
    /// Among the samples only (an appended variant): name, new bytes.
    appended: Vec<(String, String)>,
}

impl Comparison {
    /// Whether bytes already written changed or disappeared: a storage format change.
    fn changes_stored_bytes(&self) -> bool {
        !self.changed.is_empty() || !self.removed.is_empty()
    }

    fn is_empty(&self) -> bool {
        !self.changes_stored_bytes() && self.appended.is_empty()
    }
}

/// Compares golden entries (name to hex) with the samples (in their order).
fn compare(golden: &BTreeMap<String, String>, samples: &[(String, String)]) -> Comparison {
    let mut comparison = Comparison::default();
    let names: BTreeSet<&str> = samples.iter().map(|(name, _)| name.as_str()).collect();
    for (name, bytes) in samples {
        match golden.get(name) {
            None => comparison.appended.push((name.clone(), bytes.clone())),
            Some(golden_bytes) if golden_bytes != bytes => {
                comparison.changed.push((name.clone(), golden_bytes.clone(), bytes.clone()))
            }
            Some(_) => {}
        }
    }
    for (name, bytes) in golden {
        if !names.contains(name.as_str()) {
            comparison.removed.push((name.clone(), bytes.clone()));
        }
    }
    comparison
}

/// Where two hex strings first differ, in bytes.
fn first_difference(golden: &str, new: &str) -> usize {
    golden.bytes().zip(new.bytes()).take_while(|(a, b)| a == b).count() / 2
}

/// The failure message of a comparison: one paragraph per changed, removed and appended sample.
fn describe(comparison: &Comparison) -> String {
    let bump = |name: &str| {
        format!(
            "the encoding of {name} changed: this is a storage format change; bump STORAGE_FORMAT in raft-store/src/codec.rs (and say what changed in its doc comment), then regenerate with {REGENERATE}"
        )
    };
    let mut paragraphs = Vec::new();
    for (name, golden, new) in &comparison.changed {
        paragraphs.push(format!(
            "{}\n  golden: {golden}\n  new:    {new}\n  (first difference at byte {})",
            bump(name),
            first_difference(golden, new)
        ));
    }
    for (name, golden) in &comparison.removed {
        paragraphs.push(format!("{}\n  golden: {golden}\n  new:    (no sample of this name any more)", bump(name)));
    }
    for (name, new) in &comparison.appended {
        paragraphs.push(format!(
            "new encoding {name}: regenerate the golden file with {REGENERATE} (appending a variant needs no format bump)\n  new:    {new}"
        ));
    }
    paragraphs.join("\n\n")
}

/// What the golden test does.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// The samples match the golden file.
    Matches,
    /// Write this text to the golden file (regeneration only).
    Rewrite(String),
    /// Fail with this message.
    Fail(String),
}

/// Judges the samples against the golden file (`None`: there is none yet) for a build of storage
/// format `format`, regenerating when `regenerate`.
fn judge(golden: Option<&Golden>, samples: &[(String, String)], format: u32, regenerate: bool) -> Verdict {
    let Some(golden) = golden else {
        return if regenerate {
            Verdict::Rewrite(render_golden(format, samples))
        } else {
            Verdict::Fail(format!("there is no golden file yet: generate it with {REGENERATE}"))
        };
    };
    if golden.format > format {
        return Verdict::Fail(format!(
            "the golden file pins storage format {}, newer than this build's STORAGE_FORMAT {format}; a format number never goes down",
            golden.format
        ));
    }
    if golden.format < format {
        return if regenerate {
            Verdict::Rewrite(render_golden(format, samples))
        } else {
            Verdict::Fail(format!(
                "STORAGE_FORMAT is {format}, the golden file pins format {}: regenerate it with {REGENERATE}",
                golden.format
            ))
        };
    }
    let comparison = compare(&golden.map(), samples);
    if comparison.changes_stored_bytes() || (!regenerate && !comparison.is_empty()) {
        return Verdict::Fail(describe(&comparison));
    }
    if regenerate { Verdict::Rewrite(render_golden(format, samples)) } else { Verdict::Matches }
}

// ---------------------------------------------------------------------------------------------
// The tests.

#[test]
fn every_stored_encoding_matches_the_golden_file() {
    let path = golden_path();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => panic!("{}: {error}", path.display()),
    };
    let golden =
        text.as_deref().map(|text| parse_golden(text).unwrap_or_else(|error| panic!("{}: {error}", path.display())));
    let regenerate = std::env::var(REGENERATE_VAR).is_ok_and(|value| value == "1");
    match judge(golden.as_ref(), &hex_samples(), STORAGE_FORMAT, regenerate) {
        Verdict::Matches => {}
        Verdict::Rewrite(text) => std::fs::write(&path, text).unwrap(),
        Verdict::Fail(message) => panic!("{}:\n{message}", path.display()),
    }
}

#[test]
fn the_golden_file_is_this_builds_format() {
    let path = golden_path();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}; generate it with {REGENERATE}", path.display()));
    let golden = parse_golden(&text).unwrap();
    assert_eq!(
        golden.format,
        STORAGE_FORMAT,
        "{} pins storage format {}, this build writes {STORAGE_FORMAT}: regenerate it with {REGENERATE}",
        path.display(),
        golden.format
    );
}

#[test]
fn sample_names_are_unique() {
    let mut seen = BTreeSet::new();
    for (name, _) in samples() {
        assert!(!name.is_empty() && !name.contains(char::is_whitespace), "sample name {name:?}");
        assert!(seen.insert(name.clone()), "two samples are named {name}");
    }
}

#[test]
fn samples_are_deterministic() {
    assert_eq!(samples(), samples());
}

/// The storage layer encodes records through `RecordRef`; it must write exactly what `Record` does.
#[test]
fn a_borrowed_record_encodes_as_its_record() {
    for record in records() {
        assert_eq!(sealed!(record_ref(&record)), sealed!(record), "{}", record_name(&record));
    }
}

/// The number of variants of enum `$type`, from its decoder: the first variant index that does
/// not decode as a variant at all (a valid index with nothing after it is cut short instead).
macro_rules! variant_count {
    ($type:ty) => {
        (0u8..128)
            .find(|index| matches!(postcard::from_bytes::<$type>(&[*index]), Err(postcard::Error::SerdeDeCustom)))
            .expect("an enum of fewer than 128 variants")
    };
}

/// Asserts that `$values` hold one value of every variant of enum `$type`.
macro_rules! assert_every_variant {
    ($type:ty, $values:expr) => {{
        let sampled: BTreeSet<u8> = $values.iter().map(|value| plain!(value)[0]).collect();
        let every: BTreeSet<u8> = (0..variant_count!($type)).collect();
        assert_eq!(sampled, every, "the variants of {} sampled, by index", stringify!($type));
    }};
}

#[test]
fn every_variant_of_every_sampled_enum_has_a_sample() {
    assert_every_variant!(Command, commands());
    assert_every_variant!(RegisteredAnswer, RegisteredAnswer::samples());
    assert_every_variant!(ControllerAction, controller_actions());
    assert_every_variant!(AuthCommand, auth_commands());
    assert_every_variant!(FormulaSource, formula_sources());
    assert_every_variant!(RecordKey, record_keys());
    assert_every_variant!(Record, records());
    assert_every_variant!(Refusal, refusals());
    assert_every_variant!(Outcome, outcomes());
    assert_every_variant!(Status, statuses());
    assert_every_variant!(Role, roles());
    assert_every_variant!(EntryPayloadOf<TypeConfig>, entry_payloads());
    assert_every_variant!(LeaderRequest, leader_requests());
    assert_every_variant!(MemberChange, member_changes());
    assert_every_variant!(MoveRefused, move_refusals());
    assert_every_variant!(ChangeRefused, change_refusals());
    assert_every_variant!(AppendEntriesResponse<TypeConfig>, append_entries_responses());
    assert_every_variant!(StreamAppendError<TypeConfig>, stream_append_errors());
    // The counts as the enums stand today, so the probe itself is known to work.
    assert_eq!(variant_count!(Command), 39);
    assert_eq!(variant_count!(ControllerAction), 8);
    assert_eq!(variant_count!(Refusal), 20);
}

fn entries(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(name, bytes)| (name.to_string(), bytes.to_string())).collect()
}

fn golden_of(format: u32, pairs: &[(&str, &str)]) -> Golden {
    Golden { format, entries: entries(pairs) }
}

#[test]
fn the_comparison_tells_unchanged_appended_changed_and_removed_apart() {
    let golden = golden_of(10, &[("a", "00"), ("b", "0100"), ("c", "02")]).map();

    let unchanged = compare(&golden, &entries(&[("a", "00"), ("b", "0100"), ("c", "02")]));
    assert_eq!(unchanged, Comparison::default());
    assert!(unchanged.is_empty() && !unchanged.changes_stored_bytes());

    let appended = compare(&golden, &entries(&[("a", "00"), ("b", "0100"), ("c", "02"), ("d", "03")]));
    assert_eq!(appended.appended, entries(&[("d", "03")]));
    assert!(!appended.changes_stored_bytes());

    let changed = compare(&golden, &entries(&[("a", "00"), ("b", "0101"), ("c", "02")]));
    assert_eq!(changed.changed, vec![("b".to_string(), "0100".to_string(), "0101".to_string())]);
    assert!(changed.changes_stored_bytes());
    assert_eq!(first_difference("0100", "0101"), 1);

    let removed = compare(&golden, &entries(&[("a", "00"), ("c", "02")]));
    assert_eq!(removed.removed, entries(&[("b", "0100")]));
    assert!(removed.changes_stored_bytes());
}

#[test]
fn the_rules_fail_rewrite_or_refuse_as_the_format_number_allows() {
    let golden = golden_of(10, &[("a", "00"), ("b", "01")]);
    let same = entries(&[("a", "00"), ("b", "01")]);
    let appended = entries(&[("a", "00"), ("b", "01"), ("c", "02")]);
    let changed = entries(&[("a", "00"), ("b", "02")]);
    let removed = entries(&[("a", "00")]);

    // Checking.
    assert_eq!(judge(Some(&golden), &same, 10, false), Verdict::Matches);
    let Verdict::Fail(message) = judge(Some(&golden), &appended, 10, false) else { panic!("an appended sample fails") };
    assert!(
        message.starts_with("new encoding c: regenerate the golden file with `STRAND_REGENERATE_FORMAT=1"),
        "{message}"
    );
    assert!(message.contains("(appending a variant needs no format bump)"), "{message}");
    let Verdict::Fail(message) = judge(Some(&golden), &changed, 10, false) else { panic!("a changed sample fails") };
    assert!(
        message.starts_with(
            "the encoding of b changed: this is a storage format change; bump STORAGE_FORMAT in raft-store/src/codec.rs"
        ),
        "{message}"
    );
    assert!(message.contains("golden: 01") && message.contains("new:    02"), "{message}");
    let Verdict::Fail(message) = judge(Some(&golden), &removed, 10, false) else { panic!("a removed sample fails") };
    assert!(message.starts_with("the encoding of b changed"), "{message}");
    assert!(
        matches!(judge(Some(&golden), &same, 11, false), Verdict::Fail(message) if message.contains("STORAGE_FORMAT is 11"))
    );
    assert!(matches!(judge(None, &same, 10, false), Verdict::Fail(_)));

    // Regenerating: appended samples are added under the same number; changed or removed ones
    // are refused until the number goes up, and then everything is rewritten.
    assert_eq!(judge(Some(&golden), &same, 10, true), Verdict::Rewrite(render_golden(10, &same)));
    assert_eq!(judge(Some(&golden), &appended, 10, true), Verdict::Rewrite(render_golden(10, &appended)));
    let Verdict::Fail(message) = judge(Some(&golden), &changed, 10, true) else { panic!("a change needs a bump") };
    assert!(message.starts_with("the encoding of b changed: this is a storage format change"), "{message}");
    assert!(matches!(judge(Some(&golden), &removed, 10, true), Verdict::Fail(_)));
    assert_eq!(judge(Some(&golden), &changed, 11, true), Verdict::Rewrite(render_golden(11, &changed)));
    assert_eq!(judge(Some(&golden), &removed, 11, true), Verdict::Rewrite(render_golden(11, &removed)));
    assert!(
        matches!(judge(Some(&golden), &same, 9, true), Verdict::Fail(message) if message.contains("never goes down"))
    );
    assert_eq!(judge(None, &same, 10, true), Verdict::Rewrite(render_golden(10, &same)));

    // What is written reads back.
    assert_eq!(
        parse_golden(&render_golden(11, &appended)),
        Ok(golden_of(11, &[("a", "00"), ("b", "01"), ("c", "02")]))
    );
    assert!(parse_golden("storage format 10\na 00\na 01\n").is_err(), "a name twice");
    assert!(parse_golden("# only a comment\n").is_err());
    assert!(parse_golden("storage format 10\na 0x\n").is_err(), "not hex");
    assert_eq!(parse_golden(&render_golden(10, &entries(&[("empty", "")]))), Ok(golden_of(10, &[("empty", "")])));
}
