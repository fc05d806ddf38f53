//! The orchestration scenarios of `strand bench`: `hook --claim` by pool agents, `ready --limit 1`
//! over a large store, closing a blocker with many dependents, and `watch` fan-out. Each runs in a
//! namespace of its own on a running cluster, prints medians and tails, and checks the one
//! property that makes its numbers meaningful (no bead handed out twice, every dependent ready,
//! every watcher saw every event in order); it exits 1 when that check fails.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use api::client::{Client, ClientError};
use api::command::{Command, CreateBead, Query, ReadyFilter};
use api::commands::ready::Ready;
use api::model::{Actor, BeadId, Namespace, Timestamp};
use api::outcome::Outcome;
use clap::Args;
use futures::StreamExt;
use hdrhistogram::Histogram;

use crate::bench::support::{agent_client, check_range, create_beads, latency_summary, new_histogram};
use crate::{Cli, CommandResult, Failure};

/// Most watchers of the fan-out scenario.
pub const WATCHERS_MAX: usize = 1000;
/// Most events the fan-out scenario produces (each watcher's check keeps one slot per event).
pub const WATCH_EVENTS_MAX: usize = 1_000_000;
/// Most beads the ready scenario creates.
pub const READY_BEADS_MAX: usize = 2_000_000;
/// Most dependents of the blocker scenario (one `ready` answer must hold them all).
pub const DEPENDENTS_MAX: usize = api::limits::LIST_RESULTS_MAX;

#[derive(Args, Debug)]
pub struct HookArgs {
    /// Pool agents, each with its own client.
    #[arg(long, default_value_t = 32)]
    pub agents: usize,
    /// Beads routed to the pool.
    #[arg(long, default_value_t = 2000)]
    pub beads: usize,
}

#[derive(Args, Debug)]
pub struct ReadyArgs {
    /// Beads stored before the large measurement.
    #[arg(long, default_value_t = 1_000_000)]
    pub beads: usize,
    /// `ready --limit 1` queries per measurement.
    #[arg(long, default_value_t = 2000)]
    pub queries: usize,
}

#[derive(Args, Debug)]
pub struct BlockerArgs {
    /// Beads that wait for the blocker.
    #[arg(long, default_value_t = 10_000)]
    pub dependents: usize,
    /// Times the scenario is repeated (a fresh blocker each time).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
}

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// Concurrent `watch` streams.
    #[arg(long, default_value_t = 100)]
    pub watchers: usize,
    /// Events produced (one create each).
    #[arg(long, default_value_t = 2000)]
    pub events: usize,
}

fn micros(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX)
}

fn millis(histogram: &Histogram<u64>, quantile: f64) -> f64 {
    histogram.value_at_quantile(quantile) as f64 / 1000.0
}

fn failed(error: impl std::fmt::Display) -> Failure {
    Failure::Refused(error.to_string())
}

/// A client of a new namespace for one scenario run.
fn fresh_client(cli: &Cli, scenario: &str) -> Result<(Namespace, Arc<Client>), Failure> {
    let namespace = fresh_namespace(scenario);
    let client = agent_client(cli, &namespace)?;
    println!("namespace {namespace}");
    Ok((namespace, client))
}

fn fresh_namespace(scenario: &str) -> Namespace {
    Namespace(format!("bench-{scenario}-{:08x}", rand::random::<u32>()))
}

/// `bench hook`: N pool agents loop `hook --claim` then close what they got.
pub async fn run_hook(cli: &Cli, args: &HookArgs) -> CommandResult {
    check_range("--agents", args.agents, 1, crate::bench::support::AGENTS_MAX)?;
    let (namespace, setup) = fresh_client(cli, "hook")?;
    let pool = "bench";
    println!("{} beads routed to pool {pool}, {} agents", args.beads, args.agents);
    create_beads(&setup, args.beads, &format!("pool:{pool}")).await?;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for agent in 0..args.agents {
        let client = agent_client(cli, &namespace)?;
        tasks.push(tokio::spawn(async move {
            let (mut latency, mut got) = (new_histogram(), Vec::new());
            let actor = Actor(format!("agent-{agent}"));
            loop {
                let attempt = Instant::now();
                let command = Command::HookClaim(api::command::HookClaim {
                    agent: actor.clone(),
                    pool: Some(pool.to_string()),
                    lease_ms: None,
                });
                let beads = match client.execute(command).await? {
                    Outcome::Beads(beads) => beads,
                    other => return Err(ClientError::Failed(format!("hook --claim answered {other:?}"))),
                };
                latency.saturating_record(micros(attempt.elapsed()));
                let Some(bead) = beads.into_iter().next() else { break };
                client
                    .execute(Command::Close(api::command::Close { ids: vec![bead.id.clone()], reason: None }))
                    .await?;
                got.push(bead.id);
            }
            Ok::<_, ClientError>((latency, got))
        }));
    }
    let mut latency = new_histogram();
    let mut handed_out = Vec::new();
    for task in tasks {
        let (agent_latency, got) = task.await.map_err(failed)?.map_err(Failure::from)?;
        latency.add(&agent_latency).map_err(failed)?;
        handed_out.extend(got);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let unique: BTreeSet<&BeadId> = handed_out.iter().collect();
    println!(
        "hook --claim agents={} claimed={} {:.0} claim+close/s  hook {}",
        args.agents,
        handed_out.len(),
        handed_out.len() as f64 / elapsed.max(1e-9),
        latency_summary(&latency)
    );
    if unique.len() != handed_out.len() || handed_out.len() != args.beads {
        eprintln!("error: {} beads handed out, {} distinct, {} routed", handed_out.len(), unique.len(), args.beads);
        return Ok(false);
    }
    println!("ok: every bead handed out exactly once");
    Ok(true)
}

async fn ready_latency(client: &Client, queries: usize) -> Result<Histogram<u64>, Failure> {
    let mut latency = new_histogram();
    for _ in 0..queries {
        let filter = ReadyFilter { limit: 1, ..Default::default() };
        let attempt = Instant::now();
        client.query(Query::from(Ready { filter, now: Timestamp(0) })).await?;
        latency.saturating_record(micros(attempt.elapsed()));
    }
    Ok(latency)
}

/// `bench ready`: `ready --limit 1` latency with 100 beads stored, then with `--beads`.
pub async fn run_ready(cli: &Cli, args: &ReadyArgs) -> CommandResult {
    check_range("--beads", args.beads, 100, READY_BEADS_MAX)?;
    let (_, client) = fresh_client(cli, "ready")?;
    let mut stored = 0;
    for target in [100, args.beads] {
        let started = Instant::now();
        create_beads(&client, target - stored, "bench").await?;
        let created = target - stored;
        stored = target;
        println!(
            "stored {stored} beads ({created} created at {:.0}/s)",
            created as f64 / started.elapsed().as_secs_f64()
        );
        let latency = ready_latency(&client, args.queries).await?;
        println!(
            "ready --limit 1 with {stored:>8} beads: p50={:.3}ms p99={:.3}ms ({} linearizable queries)",
            millis(&latency, 0.5),
            millis(&latency, 0.99),
            args.queries
        );
    }
    Ok(true)
}

/// `bench blocker`: closing one bead that `--dependents` beads wait for.
pub async fn run_blocker(cli: &Cli, args: &BlockerArgs) -> CommandResult {
    check_range("--dependents", args.dependents, 1, DEPENDENTS_MAX)?;
    let (_, client) = fresh_client(cli, "blocker")?;
    for round in 1..=args.rounds {
        let label = format!("round-{round}");
        let blocker = match client
            .execute(Command::Create(CreateBead { title: "blocker".into(), ..Default::default() }))
            .await?
        {
            Outcome::Bead(bead) => bead.id,
            other => return Err(failed(format!("create answered {other:?}"))),
        };
        let dependents = crate::bench::support::create_waiting(&client, args.dependents, &label, &blocker).await?;
        let ready_filter = ReadyFilter { labels_all: vec![label.clone()], limit: 0, ..Default::default() };
        let ready_count = |answer: Outcome| match answer {
            Outcome::Beads(beads) => Ok(beads.len()),
            other => Err(crate::answers::unexpected(&other)),
        };
        let before =
            ready_count(client.query(Query::from(Ready { filter: ready_filter.clone(), now: Timestamp(0) })).await?)?;
        let started = Instant::now();
        client.execute(Command::Close(api::command::Close { ids: vec![blocker], reason: None })).await?;
        let close = started.elapsed();
        let after = ready_count(client.query(Query::from(Ready { filter: ready_filter, now: Timestamp(0) })).await?)?;
        println!(
            "round {round}: close of a blocker with {} dependents took {:.2}ms; ready before {before}, after {after}",
            dependents.len(),
            close.as_secs_f64() * 1000.0
        );
        if before != 0 || after != args.dependents {
            eprintln!("error: expected 0 ready before and {} after", args.dependents);
            return Ok(false);
        }
    }
    Ok(true)
}

/// `bench watch`: `--watchers` streams, `--events` creates, one after another; the latency from
/// sending a create to each watcher receiving its event (so it includes the Raft commit), and a
/// check that every watcher saw every event once, in order.
pub async fn run_watch(cli: &Cli, args: &WatchArgs) -> CommandResult {
    check_range("--watchers", args.watchers, 1, WATCHERS_MAX)?;
    check_range("--events", args.events, 1, WATCH_EVENTS_MAX)?;
    let (namespace, writer) = fresh_client(cli, "watch")?;
    // The first create fixes the namespace; watchers start after it.
    create_beads(&writer, 1, "bench").await?;
    let sent: Arc<std::sync::Mutex<Vec<Option<Instant>>>> =
        Arc::new(std::sync::Mutex::new(vec![None; args.events + 2]));
    let mut watchers = Vec::new();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(args.watchers);
    for _ in 0..args.watchers {
        let (client, sent, ready_tx) = (agent_client(cli, &namespace)?, sent.clone(), ready_tx.clone());
        let expected = args.events as u64;
        watchers.push(tokio::spawn(async move {
            let mut latency = new_histogram();
            let mut next_seq = 2;
            let stream = client.watch(1, vec!["bead.created".into()]);
            futures::pin_mut!(stream);
            let _ = ready_tx.send(()).await;
            while next_seq < 2 + expected {
                let event = match stream.next().await {
                    Some(event) => event?,
                    None => return Err(ClientError::Failed("the watch stream ended".into())),
                };
                if event.seq != next_seq {
                    return Err(ClientError::Failed(format!("expected seq {next_seq}, got {}", event.seq)));
                }
                let sent_at = sent.lock().expect("no panic holds the lock")[event.seq as usize];
                let sent_at =
                    sent_at.ok_or_else(|| ClientError::Failed(format!("event {} before its write", event.seq)))?;
                latency.saturating_record(micros(sent_at.elapsed()));
                next_seq += 1;
            }
            Ok::<_, ClientError>(latency)
        }));
    }
    for _ in 0..args.watchers {
        ready_rx.recv().await;
    }
    let started = Instant::now();
    for index in 0..args.events {
        // One writer, one create at a time: the n-th create is event n + 1 of the namespace.
        sent.lock().expect("no panic holds the lock")[index + 2] = Some(Instant::now());
        let bead =
            match writer.execute(Command::Create(CreateBead { title: "event".into(), ..Default::default() })).await? {
                Outcome::Bead(bead) => bead,
                other => return Err(failed(format!("create answered {other:?}"))),
            };
        if bead.seq != index as u64 + 2 {
            return Err(failed(format!(
                "create {index} got bead seq {}; is another writer using the namespace?",
                bead.seq
            )));
        }
    }
    let mut latency = new_histogram();
    for watcher in watchers {
        latency.add(&watcher.await.map_err(failed)?.map_err(Failure::from)?).map_err(failed)?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "watch fan-out watchers={} events={} deliveries={} ({:.0}/s) write-to-delivery {}",
        args.watchers,
        args.events,
        latency.len(),
        latency.len() as f64 / elapsed.max(1e-9),
        latency_summary(&latency)
    );
    println!("ok: every watcher saw every event once, in order");
    Ok(true)
}
