//! Simulated agents: turmoil client hosts that drive the cluster through `api::client::Client`,
//! the same client the CLI uses, over the simulated network.
//!
//! Each agent talks to the nodes in its own seeded order and does create, claim, claim_next,
//! update, set_metadata (a fresh key each time, on a small set of hot beads, so that writes of
//! different keys of one bead race), close, get, ready and list. The client retries with its
//! request ids, as real clients do. Every operation goes into the [`History`], its outcome
//! unknown when the client gave up or the cluster could not tell (an expired session).
//!
//! Beside them, [`LEASE_AGENTS`] lease agents work as an orchestrated agent does, on beads of
//! their own (label [`LEASE_LABEL`]): each creates a bead, claims the first ready one with a
//! [`LEASE_MS`] lease (perhaps one another agent abandoned), and then either renews it and closes
//! it fenced by its lease id, or dies silently (abandons it: the controller must expire it), or
//! stalls past its lease and then tries to close it with its old lease id.
//!
//! Under the upgrade fault, a canary agent creates canaries ([`Op::Canary`]) throughout, which
//! the older build's versions apply and the newer build's refuses.
//!
//! One orchestration agent cooks the orderer's formula, slings new tasks to a pool, takes them
//! back with `hook --claim` and closes them (closing their auto-convoys), sends mail and purges,
//! each with a title unique in the run.
//!
//! With large values (`--large-values`), some creates carry metadata as large as one request may
//! ([`LARGE_VALUES_PER_BEAD`] values of [`LARGE_VALUE_BYTES`]), so that replication, catch-up and
//! snapshots move entries and records near the size limits. A run makes at most
//! [`LARGE_BEADS_MAX`] of them: every node holds each one in memory, in its log and in its state.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::client::{Client, ClientError};
use api::command::{
    Command, Cook, CreateBead, Fence, FormulaSource, ListFilter, MailSend, Query, ReadyFilter, Sling, Txn, UpdateBead,
};
use api::commands::get::Get;
use api::commands::list::List;
use api::commands::ready::Ready;
use api::model::{Actor, BeadId, Timestamp};
use api::outcome::{Outcome, Refusal};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::history::{self, History, Op, OpResult, SharedHistory};
use crate::target::Target;

/// The label every simulated bead carries.
pub const LABEL: &str = "sim";
/// The label of the lease agents' beads.
pub const LEASE_LABEL: &str = "sim-lease";
/// The label of the canary agent's beads.
pub const CANARY_LABEL: &str = "sim-canary";
/// The pool the orchestration agent slings to and hooks from.
pub const SIM_POOL: &str = "sim-pool";
/// Lease agents in every run.
pub const LEASE_AGENTS: usize = 2;
/// The lease they claim with.
pub const LEASE_MS: u64 = 2_000;
/// How long a stalled lease agent sleeps before its late close: past its lease, a sweep and
/// a margin.
pub const STALL_MS: u64 = LEASE_MS + 1_500;
/// Beads an agent picks its targets from: the most recently created ones.
pub const HOT_BEADS: usize = 6;
pub use crate::target::{ATTEMPT_TIMEOUT_MS, CALL_DEADLINE_MS};
/// Longest pause between two operations of an agent (simulated time).
pub const THINK_MS_MAX: u64 = 40;
/// Most beads the final read lists.
pub const FINAL_LIST_MAX: u32 = 20_000;
/// Metadata values of a large create.
pub const LARGE_VALUES_PER_BEAD: usize = 14;
/// Bytes of each value of a large create.
pub const LARGE_VALUE_BYTES: usize = 63 * 1024;
/// Most large creates of a run (about 0.9 MiB each, held by every node several times over).
pub const LARGE_BEADS_MAX: usize = 12;
/// Share of creates, in percent, that are large while the run's large creates last.
pub const LARGE_CREATE_PERCENT: u32 = 10;
/// Bytes a large create's request may spend on everything but its values (title, keys, labels,
/// protobuf framing).
const LARGE_REQUEST_OVERHEAD_BYTES: usize = 16 * 1024;

const _: () = assert!(LARGE_VALUE_BYTES <= api::limits::METADATA_VALUE_BYTES_MAX);
const _: () = assert!(LARGE_VALUES_PER_BEAD < api::limits::METADATA_KEYS_MAX);
const _: () =
    assert!(LARGE_VALUES_PER_BEAD * LARGE_VALUE_BYTES + LARGE_REQUEST_OVERHEAD_BYTES <= api::limits::REQUEST_BYTES_MAX);

/// Beads whose creation was acknowledged, in creation order.
pub type KnownBeads = Arc<Mutex<Vec<BeadId>>>;

/// A client of the run's cluster.
pub fn client(target: &Target, node_ids: &[u64], rng: &mut StdRng) -> Result<Client, String> {
    target.client_as(node_ids, rng, "")
}

/// A client whose proposals carry `actor` (a lease's renewals must come from its holder).
pub fn client_as(target: &Target, node_ids: &[u64], rng: &mut StdRng, actor: &str) -> Result<Client, String> {
    target.client_as(node_ids, rng, actor)
}

fn pick_bead(rng: &mut StdRng, known: &KnownBeads) -> Option<BeadId> {
    let known = known.lock().expect("known beads lock");
    let hot = &known[known.len().saturating_sub(HOT_BEADS)..];
    hot.get(rng.random_range(0..hot.len().max(1))).cloned()
}

/// The metadata of a large create of `title`: [`LARGE_VALUES_PER_BEAD`] values of
/// [`LARGE_VALUE_BYTES`], each a pattern of the title and its key, so that no two are alike.
pub fn large_metadata(title: &str) -> BTreeMap<String, String> {
    (0..LARGE_VALUES_PER_BEAD)
        .map(|index| {
            let key = format!("big-{index:02}");
            let unit = format!("{title}/{key}|");
            let mut value = unit.repeat(LARGE_VALUE_BYTES / unit.len() + 1);
            value.truncate(LARGE_VALUE_BYTES);
            (key, value)
        })
        .collect()
}

/// A create: large while the run's large creates last and the roll says so (no roll at all
/// when none are left, so runs without large values draw the same numbers as before they existed).
fn create(rng: &mut StdRng, title: String, large_left: &AtomicUsize) -> Op {
    let large = large_left.load(Ordering::Relaxed) > 0 && rng.random_range(0..100) < LARGE_CREATE_PERCENT;
    if large {
        large_left.fetch_sub(1, Ordering::Relaxed);
        return Op::CreateLarge { title };
    }
    Op::Create { title }
}

/// The share of each kind of operation an agent draws: a weight per kind, in the order of
/// [`Mix::KINDS`]. An agent that knows no bead yet creates one, whatever the mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mix(pub [u32; 9]);

impl Mix {
    /// The kinds, in the order of the weights.
    pub const KINDS: [&'static str; 9] =
        ["create", "claim", "claim_next", "update", "set_metadata", "close", "get", "ready", "list"];
    /// The mix of every run but a swarm one's (percentages).
    pub const DEFAULT: Mix = Mix([15, 15, 10, 10, 20, 5, 12, 8, 5]);

    /// The kind a roll in `0..total` falls on.
    fn kind(&self, roll: u32) -> usize {
        let mut end = 0;
        for (kind, weight) in self.0.iter().enumerate() {
            end += weight;
            if roll < end {
                return kind;
            }
        }
        0
    }

    /// The sum of the weights (at least 1: creates always have weight).
    fn total(&self) -> u32 {
        self.0.iter().sum::<u32>().max(1)
    }
}

impl std::fmt::Display for Mix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> =
            Mix::KINDS.iter().zip(self.0).map(|(kind, weight)| format!("{kind} {weight}")).collect();
        f.write_str(&parts.join(", "))
    }
}

/// Chooses the next operation of agent `agent`, with `mix`'s shares.
fn choose(rng: &mut StdRng, agent: usize, count: usize, known: &KnownBeads, shared: &Agents) -> Op {
    let actor = Actor(format!("agent-{agent}"));
    let roll = rng.random_range(0..shared.mix.total());
    let target = pick_bead(rng, known);
    let Some(id) = target else { return create(rng, format!("a{agent}-{count}"), &shared.large_left) };
    match shared.mix.kind(roll) {
        1 => Op::Claim { id, actor },
        2 => Op::ClaimNext { actor },
        3 => Op::Update { id, priority: rng.random_range(0..5) },
        4 => Op::SetMetadata { id, key: format!("k{agent}-{count}"), value: format!("v{count}") },
        5 => Op::Close { id },
        6 => Op::Get { id },
        7 => Op::Ready,
        8 => Op::List { limit: 10 },
        _ => create(rng, format!("a{agent}-{count}"), &shared.large_left),
    }
}

fn ready_filter() -> ReadyFilter {
    ReadyFilter { labels_all: vec![LABEL.into()], unassigned: true, limit: 5, ..Default::default() }
}

/// What an operation becomes on the wire: a command or a query.
enum Call {
    Write(Command),
    Read(Query),
}

fn call(op: &Op) -> Call {
    match op.clone() {
        Op::Create { title } => {
            Call::Write(Command::Create(CreateBead { title, labels: [LABEL.to_string()].into(), ..Default::default() }))
        }
        Op::CreateLarge { title } => Call::Write(Command::Create(CreateBead {
            metadata: large_metadata(&title),
            title,
            labels: [LABEL.to_string()].into(),
            ..Default::default()
        })),
        Op::Claim { id, actor } => Call::Write(Command::Claim(api::command::Claim { id, actor, lease_ms: None })),
        Op::ClaimNext { actor } => {
            Call::Write(Command::ClaimNext(api::command::ClaimNext { actor, filter: ready_filter(), lease_ms: None }))
        }
        Op::Update { id, priority } => {
            Call::Write(Command::Update(UpdateBead { id, priority: Some(priority), ..Default::default() }))
        }
        Op::SetMetadata { id, key, value } => Call::Write(Command::SetMetadata(api::command::SetMetadata {
            id,
            entries: BTreeMap::from([(key, Some(value))]),
        })),
        Op::Close { id } => Call::Write(Command::Close(api::command::Close { ids: vec![id], reason: None })),
        Op::Get { id } => Call::Read(Query::from(Get { ids: vec![id] })),
        Op::Ready => Call::Read(Query::from(Ready { filter: ready_filter(), now: Timestamp(0) })),
        Op::List { limit } => Call::Read(Query::from(List(list_filter(limit)))),
        Op::CreateLeasable { title } => Call::Write(Command::Create(CreateBead {
            title,
            labels: [LEASE_LABEL.to_string()].into(),
            ..Default::default()
        })),
        Op::LeaseClaimNext { actor, lease_ms } => Call::Write(Command::ClaimNext(api::command::ClaimNext {
            actor,
            filter: ReadyFilter {
                labels_all: vec![LEASE_LABEL.into()],
                unassigned: true,
                limit: 1,
                ..Default::default()
            },
            lease_ms: Some(lease_ms),
        })),
        Op::LeaseRenew { id, .. } => Call::Write(Command::LeaseRenew(api::command::LeaseRenew { id, lease_id: None })),
        Op::Cook { title } => Call::Write(Command::MolCook(Cook {
            formula: FormulaSource::Named(crate::healed::SIM_FORMULA_NAME.into()),
            title: Some(title),
            vars: BTreeMap::new(),
            ephemeral: false,
        })),
        Op::Sling { title } => Call::Write(Command::Sling(Sling {
            subject: title,
            target: SIM_POOL.into(),
            pool: true,
            formula: None,
            vars: BTreeMap::new(),
            no_convoy: false,
            owned: false,
            merge: None,
        })),
        Op::HookClaim { agent } => Call::Write(Command::HookClaim(api::command::HookClaim {
            agent,
            pool: Some(SIM_POOL.into()),
            lease_ms: None,
        })),
        Op::HookClose { id } => Call::Write(Command::Close(api::command::Close { ids: vec![id], reason: None })),
        Op::Mail { subject } => Call::Write(Command::MailSend(MailSend {
            to: "sim-mayor".into(),
            subject,
            body: "report".into(),
            reply_to: None,
        })),
        Op::Purge => Call::Write(Command::Purge(api::command::Purge { older_than_ms: 3_600_000 })),
        Op::Canary { title } => Call::Write(Command::Create(CreateBead {
            title,
            labels: [CANARY_LABEL.to_string()].into(),
            ..Default::default()
        })),
        Op::FencedClose { id, lease_id, .. } => Call::Write(Command::Txn(Txn {
            conditions: Vec::new(),
            fences: vec![Fence { id: id.clone(), lease_id }],
            writes: vec![Command::Close(api::command::Close { ids: vec![id], reason: None })],
        })),
    }
}

/// Every simulated bead, newest first, closed ones included.
pub fn list_filter(limit: u32) -> ListFilter {
    ListFilter { labels_all: vec![LABEL.into()], all: true, limit, ..Default::default() }
}

/// Maps a client answer to a history result: a refusal that leaves the outcome open (an expired
/// session, a forgotten request) and every transport failure are unknown.
pub fn result_of(answer: Result<Outcome, ClientError>) -> OpResult {
    match answer {
        Ok(outcome) => OpResult::Ok(outcome),
        Err(ClientError::Refused(refusal @ (Refusal::SessionExpired { .. } | Refusal::RequestTooOld { .. }))) => {
            OpResult::Unknown(refusal.to_string())
        }
        Err(ClientError::Refused(refusal)) => OpResult::Refused(refusal),
        Err(error) => OpResult::Unknown(error.to_string()),
    }
}

/// Runs one operation and records it, its answer compacted ([`history::compact_outcome`]).
pub async fn perform(client: &Client, history: &SharedHistory, agent: usize, op: Op, final_read: bool) -> OpResult {
    let index = history.lock().expect("history lock").invoke(agent, op.clone(), final_read);
    let answer = match call(&op) {
        Call::Write(command) => client.execute(command).await,
        Call::Read(query) => client.query(query).await,
    };
    let result = match result_of(answer) {
        OpResult::Ok(outcome) => OpResult::Ok(history::compact_outcome(outcome)),
        other => other,
    };
    history.lock().expect("history lock").complete(index, result.clone());
    result
}

/// The settings of the agents of one run.
#[derive(Clone)]
pub struct Agents {
    /// How many.
    pub count: usize,
    /// The nodes they may talk to.
    pub node_ids: Vec<u64>,
    /// The run's seed.
    pub seed: u64,
    /// Simulated time at which they stop starting operations.
    pub stop_at: Duration,
    /// Large creates the agents may still make, together (0 unless the run has large values).
    pub large_left: Arc<AtomicUsize>,
    /// Whether a canary agent runs too (under [`crate::nemesis::Fault::Upgrade`]).
    pub canaries: bool,
    /// The share of each kind of operation the agents draw.
    pub mix: Mix,
    /// Where their calls go, and their clock.
    pub target: Target,
}

async fn agent(settings: Agents, index: usize, history: SharedHistory, known: KnownBeads) -> turmoil::Result {
    let mut rng = StdRng::seed_from_u64(settings.seed ^ (index as u64 + 1).wrapping_mul(0xd134_2543_de82_ef95));
    let client = client(&settings.target, &settings.node_ids, &mut rng)?;
    let mut count = 0usize;
    while settings.target.now() < settings.stop_at {
        let op = choose(&mut rng, index, count, &known, &settings);
        let is_create = op.created_title().is_some();
        let result = perform(&client, &history, index, op, false).await;
        if let (true, OpResult::Ok(Outcome::Bead(bead))) = (is_create, &result) {
            known.lock().expect("known beads lock").push(bead.id.clone());
        }
        count += 1;
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..=THINK_MS_MAX))).await;
    }
    Ok(())
}

/// A lease agent: see the module header. Its history index is `index`.
async fn lease_agent(settings: Agents, index: usize, history: SharedHistory) -> turmoil::Result {
    let mut rng = StdRng::seed_from_u64(settings.seed ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let actor = Actor(format!("lease-agent-{index}"));
    let client = client_as(&settings.target, &settings.node_ids, &mut rng, &actor.0)?;
    let mut count = 0usize;
    while settings.target.now() < settings.stop_at {
        let title = format!("l{index}-{count}");
        count += 1;
        perform(&client, &history, index, Op::CreateLeasable { title }, false).await;
        let claim = Op::LeaseClaimNext { actor: actor.clone(), lease_ms: LEASE_MS };
        let result = perform(&client, &history, index, claim, false).await;
        let Some((id, lease_id)) = result.leased_bead().map(|(bead, lease_id)| (bead.id.clone(), lease_id)) else {
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..=THINK_MS_MAX))).await;
            continue;
        };
        let close = Op::FencedClose { id: id.clone(), actor: actor.clone(), lease_id };
        match rng.random_range(0..10) {
            // Dies silently: the bead is left to the controller.
            0..2 => {}
            // Stalls past its lease, then closes with its old lease id.
            2..4 => {
                tokio::time::sleep(Duration::from_millis(STALL_MS)).await;
                perform(&client, &history, index, close, false).await;
            }
            // Works, renewing every third of the lease, then closes.
            _ => {
                for _ in 0..rng.random_range(1..=3) {
                    tokio::time::sleep(Duration::from_millis(LEASE_MS / 3)).await;
                    let renew = Op::LeaseRenew { id: id.clone(), actor: actor.clone() };
                    if let OpResult::Refused(_) = perform(&client, &history, index, renew, false).await {
                        break;
                    }
                }
                perform(&client, &history, index, close, false).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..=THINK_MS_MAX))).await;
    }
    Ok(())
}

/// The orchestration agent: see the module header. Its history index is `index`.
async fn orchestration_agent(settings: Agents, index: usize, history: SharedHistory) -> turmoil::Result {
    let mut rng = StdRng::seed_from_u64(settings.seed ^ 0x6f72_6368_6573_7472);
    let agent = Actor("sim-polecat".into());
    // Mail needs a sender: the client writes as the agent.
    let client = client_as(&settings.target, &settings.node_ids, &mut rng, &agent.0)?;
    let mut count = 0usize;
    while settings.target.now() < settings.stop_at {
        count += 1;
        let op = match rng.random_range(0..10) {
            // Titles with a space: a sling subject like `slung-3` would be taken for an id.
            0..2 => Op::Cook { title: format!("molecule {count}") },
            2..5 => Op::Sling { title: format!("slung task {count}") },
            5..8 => Op::HookClaim { agent: agent.clone() },
            8 => Op::Mail { subject: format!("mail {count}") },
            _ => Op::Purge,
        };
        let result = perform(&client, &history, index, op.clone(), false).await;
        if let (Op::HookClaim { .. }, OpResult::Ok(Outcome::Beads(beads))) = (&op, &result)
            && let Some(bead) = beads.first()
        {
            perform(&client, &history, index, Op::HookClose { id: bead.id.clone() }, false).await;
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..=THINK_MS_MAX * 4))).await;
    }
    Ok(())
}

/// The canary agent: creates canaries ([`Op::Canary`]) until the agents stop. Its history index is
/// `index`.
async fn canary_agent(settings: Agents, index: usize, history: SharedHistory) -> turmoil::Result {
    let mut rng = StdRng::seed_from_u64(settings.seed ^ 0x6361_6e61_7279);
    let client = client(&settings.target, &settings.node_ids, &mut rng)?;
    let mut count = 0usize;
    while settings.target.now() < settings.stop_at {
        let title = format!("{}-{count}", api::version::CANARY_NEXT_PREFIX);
        count += 1;
        perform(&client, &history, index, Op::Canary { title }, false).await;
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..=THINK_MS_MAX * 4))).await;
    }
    Ok(())
}

/// A client of the workload: its name and its run.
pub type NamedClient = (String, std::pin::Pin<Box<dyn std::future::Future<Output = turmoil::Result> + Send>>);

/// The agents, then the lease agents, the orchestration agent and, when asked, the canary agent
/// (their history indexes follow the healed reader's, `count`).
fn clients(settings: &Agents, history: &SharedHistory, known: &KnownBeads) -> Vec<NamedClient> {
    let mut clients: Vec<NamedClient> = Vec::new();
    for index in 0..settings.count {
        let run = agent(settings.clone(), index, history.clone(), known.clone());
        clients.push((format!("agent-{index}"), Box::pin(run)));
    }
    for lease_index in 0..LEASE_AGENTS {
        let index = settings.count + 1 + lease_index;
        let run = lease_agent(settings.clone(), index, history.clone());
        clients.push((format!("lease-agent-{lease_index}"), Box::pin(run)));
    }
    let index = settings.count + 1 + LEASE_AGENTS;
    clients
        .push(("orchestration-agent".into(), Box::pin(orchestration_agent(settings.clone(), index, history.clone()))));
    if settings.canaries {
        clients.push(("canary-agent".into(), Box::pin(canary_agent(settings.clone(), index + 1, history.clone()))));
    }
    clients
}

/// Registers the workload's clients as turmoil clients.
pub fn register(sim: &mut turmoil::Sim<'_>, settings: &Agents, history: &SharedHistory, known: &KnownBeads) {
    for (name, run) in clients(settings, history, known) {
        sim.client(name, run);
    }
}

/// Starts the workload's clients as tasks against a real cluster; each task answers its
/// client's name and how it ended.
pub fn spawn(
    settings: &Agents,
    history: &SharedHistory,
    known: &KnownBeads,
) -> Vec<tokio::task::JoinHandle<(String, Result<(), String>)>> {
    clients(settings, history, known)
        .into_iter()
        .map(|(name, run)| tokio::spawn(async move { (name, run.await.map_err(|error| error.to_string())) }))
        .collect()
}

/// The names of the history's clients, by index: the agents, the healed reader, the lease
/// agents, the orchestration agent and, with canaries, the canary agent (as [`register`] and
/// the healed reader number them).
pub fn client_names(agents: usize, canaries: bool) -> Vec<String> {
    let mut names: Vec<String> = (0..agents).map(|index| format!("agent-{index}")).collect();
    names.push("healed reader".into());
    names.extend((0..LEASE_AGENTS).map(|index| format!("lease-agent-{index}")));
    names.push("orchestration-agent".into());
    if canaries {
        names.push("canary-agent".into());
    }
    names
}

/// A fresh history of a run against `target`.
pub fn new_history(target: &Target) -> SharedHistory {
    Arc::new(Mutex::new(History::new(target.started())))
}
