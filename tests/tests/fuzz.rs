//! Fuzzing of everything Strand decodes or parses from outside: every gRPC request as protobuf
//! bytes (decoded through the services' codec and its decoding budget, converted, then applied
//! to or read from a state machine that holds beads), the formula, order and cron parsers, and,
//! from storage and peers, log entries, proposals, state records and keys, whole snapshot files
//! as a node verifies them on arrival, and the peer protocol's payloads (appends, votes,
//! forwarded requests) as the peer plane decodes them. (The exec-store stdin parser is fuzzed in
//! `cli/src/compat/exec_store.rs`, inside the binary.)
//!
//! These are proptest-driven, structure-aware fuzz targets rather than `cargo fuzz` ones: `cargo
//! fuzz` needs a nightly toolchain for its sanitizer flags, and none can be installed here. Each
//! target mixes arbitrary bytes with mutations (flipped, cut, inserted and repeated bytes) of
//! valid inputs, so most cases get past the first check. None may panic. CI runs `FUZZ_CASES_DEFAULT`
//! cases per target; set `STRAND_FUZZ_CASES` for a longer run. A failing case is shrunk and
//! printed by proptest; add it as a test here so every later run replays it.
#![allow(clippy::unwrap_used)]

use api::command::{Command, CreateBead, Proposal};
use api::convert::{Call, IntoCall};
use api::decode_budget::decode_budgeted;
use api::model::{Actor, Namespace, Timestamp};
use api::proto as pb;
use api::state::State;
use api::state::{Record, RecordKey};
use proptest::prelude::*;
use prost::Message;
use raft_store::codec;
use raft_store::snapshot::{SnapshotWriter, verify};
use raft_store::types::{Entry, SnapshotMeta};

/// Cases per target in CI.
const FUZZ_CASES_DEFAULT: u32 = 300;

fn config() -> ProptestConfig {
    let cases =
        std::env::var("STRAND_FUZZ_CASES").ok().and_then(|text| text.parse().ok()).unwrap_or(FUZZ_CASES_DEFAULT);
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

/// One change to an input.
#[derive(Clone, Debug)]
enum Mutation {
    Flip(usize, u8),
    Cut(usize, usize),
    Insert(usize, Vec<u8>),
    Repeat(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, bits)| Mutation::Flip(at, bits)),
        (any::<usize>(), 0usize..64).prop_map(|(at, length)| Mutation::Cut(at, length)),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16)).prop_map(|(at, bytes)| Mutation::Insert(at, bytes)),
        (any::<usize>(), 1usize..32).prop_map(|(at, length)| Mutation::Repeat(at, length)),
    ]
}

fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for change in mutations {
        let at = |position: usize, length: usize| if length == 0 { 0 } else { position % length };
        match change {
            Mutation::Flip(position, bits) if !bytes.is_empty() => {
                let index = at(*position, bytes.len());
                bytes[index] ^= bits | 1;
            }
            Mutation::Cut(position, length) if !bytes.is_empty() => {
                let start = at(*position, bytes.len());
                let end = (start + length).min(bytes.len());
                bytes.drain(start..end);
            }
            Mutation::Insert(position, inserted) => {
                let index = at(*position, bytes.len() + 1);
                bytes.splice(index..index, inserted.iter().copied());
            }
            Mutation::Repeat(position, length) if !bytes.is_empty() => {
                let start = at(*position, bytes.len());
                let end = (start + length).min(bytes.len());
                let chunk = bytes[start..end].to_vec();
                bytes.splice(end..end, chunk);
            }
            _ => {}
        }
    }
    bytes
}

/// Arbitrary bytes, or a valid seed with a few mutations.
fn input(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let count = seeds.len();
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..512),
        (0..count, prop::collection::vec(mutation(), 0..6))
            .prop_map(move |(seed, mutations)| mutate(seeds[seed].clone(), &mutations)),
    ]
}

/// A state with beads, a formula and an order, for requests to act on.
fn populated() -> State {
    let mut state = State::new();
    let proposal = |index: u64, command| Proposal {
        request_id: None,
        timestamp: Timestamp(1_767_225_600_000 + index as i64),
        default_prefix: "st".into(),
        namespace: Namespace::default_namespace(),
        actor: Actor("fuzzer".into()),
        event_retention: api::limits::EVENT_RETENTION_DEFAULT,
        credential: None,
        command,
    };
    for index in 1..=3 {
        let create = CreateBead { title: format!("bead {index}"), ..Default::default() };
        state.apply(index, &proposal(index, Command::Create(create))).unwrap();
    }
    state
}

fn header() -> Option<pb::WriteHeader> {
    Some(pb::WriteHeader {
        namespace: "default".into(),
        client_id: 7,
        request_seq: 1,
        lowest_unacked: 1,
        actor: "a".into(),
        prefix: String::new(),
        namespace_must_exist: false,
    })
}

/// Decodes `bytes` as request `T` through the services' codec (its decoding budget first),
/// converts it, and applies it to a populated state or answers it from one.
fn request<T: Message + prost::Name + Default + IntoCall>(bytes: &[u8]) {
    let Ok(request) = decode_budgeted::<T>(&mut &bytes[..]) else { return };
    match request.into_call(Timestamp(1_767_225_700_000)) {
        Err(_) => {}
        Ok(Call::Write(write)) => {
            let mut state = populated();
            let proposal = Proposal {
                request_id: write.request_id,
                timestamp: Timestamp(1_767_225_700_000),
                default_prefix: "st".into(),
                namespace: write.namespace,
                actor: write.actor,
                event_retention: api::limits::EVENT_RETENTION_DEFAULT,
                credential: None,
                command: write.command,
            };
            let _ = state.apply(10, &proposal);
        }
        Ok(Call::Read(read)) => {
            let _ = populated().query(&read.namespace, &read.query);
        }
    }
}

/// Valid encodings of a few requests, as mutation seeds.
fn request_seeds() -> Vec<Vec<u8>> {
    vec![
        pb::CreateRequest { header: header(), title: "t".into(), labels: vec!["x".into()], ..Default::default() }
            .encode_to_vec(),
        pb::ClaimRequest { header: header(), id: "st-1".into(), ..Default::default() }.encode_to_vec(),
        pb::CloseRequest { header: header(), ids: vec!["st-2".into()], ..Default::default() }.encode_to_vec(),
        pb::ListRequest::default().encode_to_vec(),
    ]
}

/// Runs [`request`] on `bytes` for every unary RPC of the RPC table (`api::registry`), the
/// table that also generates the services' handlers; answers how many it ran.
macro_rules! every_rpc {
    ($( $service:ident $client_mod:ident :: $client:ident {
        $( $variant:ident $method:ident $request:ident $response:ident, )*
    } )*) => {
        |bytes: &[u8]| -> usize {
            let mut targets = 0;
            $( $(
                request::<pb::$request>(bytes);
                targets += 1;
            )* )*
            targets
        }
    };
}

/// The fuzz targets: every unary RPC of the table, and the watch (a stream, so not in the table).
fn every_request(bytes: &[u8]) -> usize {
    let every_rpc = api::for_each_client_rpc!(every_rpc);
    request::<pb::WatchRequest>(bytes);
    every_rpc(bytes) + 1
}

/// The unary RPCs the client services offer, counted in the schema itself: every one must be a
/// fuzz target, so a new RPC cannot go unfuzzed.
#[test]
fn every_rpc_of_the_client_services_is_a_fuzz_target() {
    let set: prost_types::FileDescriptorSet = Message::decode(api::proto::client_descriptor_set()).unwrap();
    let unary: Vec<String> = set
        .file
        .iter()
        .flat_map(|file| &file.service)
        .filter(|service| service.name() != "Cluster")
        .flat_map(|service| {
            service
                .method
                .iter()
                .filter(|method| !method.client_streaming() && !method.server_streaming())
                .map(move |method| format!("{}/{}", service.name(), method.name()))
        })
        .collect();
    assert!(unary.iter().any(|rpc| rpc == "Auth/WhoAmI"), "{unary:?}");
    assert_eq!(api::registry::CLIENT_RPCS, unary.len(), "the RPC table misses RPCs of {unary:?}");
    // One target per unary RPC, and the watch.
    assert_eq!(every_request(&[]), unary.len() + 1);
}

proptest! {
    #![proptest_config(config())]

    /// Every request type the client services accept, from the same bytes.
    #[test]
    fn every_request_decodes_converts_and_applies_without_panicking(bytes in input(request_seeds())) {
        every_request(&bytes);
    }

    #[test]
    fn formula_toml_never_panics(bytes in input(vec![FORMULA.as_bytes().to_vec()])) {
        let _ = api::formula::Formula::parse(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn order_toml_never_panics(bytes in input(ORDERS.iter().map(|order| order.as_bytes().to_vec()).collect())) {
        let _ = api::order::Order::parse("fuzzed", &String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn cron_schedules_never_panic(bytes in input(CRONS.iter().map(|cron| cron.as_bytes().to_vec()).collect())) {
        let _ = api::order::Cron::parse(&String::from_utf8_lossy(&bytes));
    }
}

const FORMULA: &str = "formula = \"release\"\nversion = 1\n[vars]\nversion = { description = \"v\", required = true }\nchannel = \"stable\"\n[[steps]]\nid = \"build\"\ntitle = \"Build {{version}}\"\n[[steps]]\nid = \"publish\"\ntitle = \"Publish {{version}} to {{channel}}\"\nneeds = [\"build\"]\n";

const ORDERS: [&str; 3] = [
    "[order]\nformula = \"f\"\ngate = \"cooldown\"\ninterval = \"24h\"\npool = \"dog\"\n",
    "[order]\nformula = \"f\"\ngate = \"cron\"\nschedule = \"0 9 * * 1-5\"\ntimezone = \"Europe/Paris\"\n",
    "[order]\nformula = \"f\"\ngate = \"condition\"\ninterval = \"1m\"\n[order.when]\nstatus = \"open\"\nlabel = \"x\"\nat_least = 3\n",
];

const CRONS: [&str; 4] = ["*/5 * * * *", "0 9 * * MON-FRI", "@daily", "15,45 0-23/2 1 JAN,JUL SUN"];

/// A proposal as the log holds one.
fn proposal() -> Proposal {
    Proposal {
        request_id: None,
        timestamp: Timestamp(1_767_225_600_000),
        default_prefix: "st".into(),
        namespace: Namespace::default_namespace(),
        actor: Actor("fuzzer".into()),
        event_retention: api::limits::EVENT_RETENTION_DEFAULT,
        credential: None,
        command: Command::Create(CreateBead { title: "seed".into(), ..Default::default() }),
    }
}

/// A valid snapshot file with a few records.
fn snapshot_seed() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seed.snapshot");
    let mut writer = SnapshotWriter::create(&path, &SnapshotMeta::default()).unwrap();
    for number in 0..3u8 {
        writer.record(&[b'k', number], &codec::encode(&format!("value {number}")).unwrap()).unwrap();
    }
    writer.finish().unwrap();
    std::fs::read(&path).unwrap()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn log_entries_and_proposals_never_panic(bytes in input(vec![codec::encode(&proposal()).unwrap()])) {
        let _ = codec::decode::<Proposal>(&bytes, "fuzzed proposal");
        let _ = codec::decode::<Entry>(&bytes, "fuzzed entry");
        let _ = codec::unseal(&bytes, "fuzzed value");
    }

    #[test]
    fn state_records_and_keys_never_panic(bytes in input(vec![codec::encode_plain(&RecordKey::ControllerTerm).unwrap()])) {
        let _ = codec::decode::<Record>(&bytes, "fuzzed record");
        let _ = codec::decode_plain::<RecordKey>(&bytes, "fuzzed key");
        let _ = codec::log_index(&bytes);
    }

    #[test]
    fn snapshot_files_are_verified_without_panicking(bytes in input(vec![snapshot_seed()])) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fuzzed.snapshot");
        std::fs::write(&path, &bytes).unwrap();
        let _ = verify(&path);
    }
}

proptest! {
    #![proptest_config(config())]

    /// What a peer sends: the payloads the peer plane decodes before it checks anything else.
    #[test]
    fn peer_payloads_never_panic(bytes in input(vec![peer_seed()])) {
        use node::peer::network::{TypeConfig, decode};
        let payload = pb::RaftPayload { data: bytes };
        let _ = decode::<openraft::raft::AppendEntriesRequest<TypeConfig>>(&payload);
        let _ = decode::<openraft::raft::VoteRequest<TypeConfig>>(&payload);
        let _ = decode::<node::leader::LeaderRequest>(&payload);
    }
}

/// A forwarded create, as a follower sends it to the leader.
fn peer_seed() -> Vec<u8> {
    let forwarded = node::leader::LeaderRequest::Write(node::leader::BeadWrite {
        namespace: Namespace::default_namespace(),
        request_id: api::command::RequestId { client_id: 1, request_seq: 1, lowest_unacked: 1 },
        actor: Actor("fuzzer".into()),
        prefix: None,
        command: proposal().command,
        credential: None,
    });
    node::peer::network::encode(&forwarded).data
}

/// The seed itself verifies, so the mutations start from a file the reader accepts.
#[test]
fn the_snapshot_seed_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seed.snapshot");
    std::fs::write(&path, snapshot_seed()).unwrap();
    verify(&path).unwrap();
}
