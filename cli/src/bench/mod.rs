//! `strand bench claim`: drives a running cluster with concurrent claiming agents and reports
//! throughput and latency. It is a benchmark, not a test: it asserts only that no bead was
//! claimed twice (and exits 1 if one was).
//!
//! This folder holds `strand bench`: this module dispatches its subcommands and runs `claim`;
//! `scenarios` runs `hook`, `ready`, `blocker` and `watch`, `lease` the lease benchmarks, and
//! `support` holds what they share.

pub mod lease;
pub mod scenarios;
pub mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use api::client::Client;
use api::command::{Command, ReadyFilter};
use api::model::{Actor, BeadId, Namespace};
use api::outcome::Outcome;
use clap::{Args, Subcommand};
use hdrhistogram::Histogram;

use crate::bench::support::{AGENTS_MAX, agent_client, create_beads, latency_summary, new_histogram};
use crate::{Cli, CommandResult, Failure};

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// M beads created, then claimed by N concurrent agents, with plain claim and with claim_next.
    Claim(ClaimArgs),
    /// N pool agents loop `hook --claim` and close what they get; no bead may go out twice.
    Hook(crate::bench::scenarios::HookArgs),
    /// `ready --limit 1` latency with 100 beads stored, then with --beads (default 1M).
    Ready(crate::bench::scenarios::ReadyArgs),
    /// Closing a blocker that --dependents beads wait for; all must become ready.
    Blocker(crate::bench::scenarios::BlockerArgs),
    /// `watch` fan-out: --watchers streams see --events creates, in order, none missed.
    Watch(crate::bench::scenarios::WatchArgs),
    /// Leases: renewal overhead against plain claims, then a mass expiry with write latency.
    Lease(crate::bench::lease::LeaseArgs),
}

#[derive(Args, Debug)]
pub struct ClaimArgs {
    /// Concurrent agents (each its own client).
    #[arg(long, default_value_t = 32)]
    agents: usize,
    /// Beads per phase.
    #[arg(long, default_value_t = 5000)]
    beads: usize,
}

struct PhaseReport {
    name: &'static str,
    claims: usize,
    lost: usize,
    elapsed: Duration,
    latency: Histogram<u64>,
    winners: Vec<(BeadId, usize)>,
}

async fn run_phase(
    name: &'static str,
    clients: &[Arc<Client>],
    work: Arc<Vec<BeadId>>,
    label: String,
) -> Result<PhaseReport, Failure> {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (agent, client) in clients.iter().enumerate() {
        let (client, next, work, label) = (client.clone(), next.clone(), work.clone(), label.clone());
        tasks.push(tokio::spawn(async move {
            let mut latency = new_histogram();
            let (mut won, mut lost) = (Vec::new(), 0usize);
            let actor = Actor(format!("agent-{agent}"));
            loop {
                let command = if name == "claim" {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(bead_id) = work.get(index) else { break };
                    Command::Claim(api::command::Claim { id: bead_id.clone(), actor: actor.clone(), lease_ms: None })
                } else {
                    let filter = ReadyFilter {
                        labels_all: vec![label.clone()],
                        unassigned: true,
                        limit: 1,
                        ..Default::default()
                    };
                    Command::ClaimNext(api::command::ClaimNext { actor: actor.clone(), filter, lease_ms: None })
                };
                let attempt = Instant::now();
                let answer = client.execute(command).await;
                latency.saturating_record(u64::try_from(attempt.elapsed().as_micros()).unwrap_or(u64::MAX));
                match answer {
                    Ok(Outcome::Bead(bead)) => won.push((bead.id, agent)),
                    Ok(Outcome::Beads(beads)) if beads.is_empty() => break,
                    Ok(Outcome::Beads(beads)) => won.extend(beads.into_iter().map(|bead| (bead.id, agent))),
                    Ok(_) => {}
                    Err(api::client::ClientError::Refused(_)) => lost += 1,
                    Err(error) => return Err(error),
                }
            }
            Ok((latency, won, lost))
        }));
    }
    let mut report = PhaseReport {
        name,
        claims: 0,
        lost: 0,
        elapsed: Duration::ZERO,
        latency: new_histogram(),
        winners: Vec::new(),
    };
    for task in tasks {
        let (latency, won, lost) = task.await.map_err(|error| Failure::Refused(error.to_string()))??;
        report.latency.add(&latency).map_err(|error| Failure::Refused(error.to_string()))?;
        report.claims += won.len();
        report.lost += lost;
        report.winners.extend(won);
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

fn print_report(report: &PhaseReport, agents: usize) {
    let seconds = report.elapsed.as_secs_f64().max(1e-9);
    println!(
        "{:<10} agents={agents:<4} claims={:<7} lost={:<5} {:>9.0} claims/s  {}",
        report.name,
        report.claims,
        report.lost,
        report.claims as f64 / seconds,
        latency_summary(&report.latency),
    );
}

fn double_claims(winners: &[(BeadId, usize)]) -> Vec<BeadId> {
    let mut seen: HashMap<&BeadId, usize> = HashMap::new();
    let mut doubles = Vec::new();
    for (bead_id, agent) in winners {
        if let Some(previous) = seen.insert(bead_id, *agent)
            && previous != *agent
        {
            doubles.push(bead_id.clone());
        }
    }
    doubles
}

/// Runs a benchmark.
pub async fn run(cli: &Cli, command: &BenchCommand) -> CommandResult {
    match command {
        BenchCommand::Claim(args) => run_claim(cli, args).await,
        BenchCommand::Hook(args) => crate::bench::scenarios::run_hook(cli, args).await,
        BenchCommand::Ready(args) => crate::bench::scenarios::run_ready(cli, args).await,
        BenchCommand::Blocker(args) => crate::bench::scenarios::run_blocker(cli, args).await,
        BenchCommand::Watch(args) => crate::bench::scenarios::run_watch(cli, args).await,
        BenchCommand::Lease(args) => crate::bench::lease::run(cli, args).await,
    }
}

async fn run_claim(cli: &Cli, args: &ClaimArgs) -> CommandResult {
    crate::bench::support::check_range("--agents", args.agents, 1, AGENTS_MAX)?;
    let run_id = rand::random::<u32>();
    let namespace = Namespace(format!("bench-{run_id:08x}"));
    let setup = agent_client(cli, &namespace)?;
    let clients: Vec<Arc<Client>> =
        (0..args.agents).map(|_| agent_client(cli, &namespace)).collect::<Result<_, _>>()?;
    println!("namespace {namespace}: creating {} beads per phase", args.beads);
    let claim_label = format!("bench-claim-{run_id:08x}");
    let work = Arc::new(create_beads(&setup, args.beads, &claim_label).await?);
    let claim = run_phase("claim", &clients, work, String::new()).await?;
    print_report(&claim, args.agents);
    let next_label = format!("bench-next-{run_id:08x}");
    create_beads(&setup, args.beads, &next_label).await?;
    let next = run_phase("claim_next", &clients, Arc::new(Vec::new()), next_label).await?;
    print_report(&next, args.agents);
    let mut doubles = double_claims(&claim.winners);
    doubles.extend(double_claims(&next.winners));
    if !doubles.is_empty() || claim.claims != args.beads || next.claims != args.beads {
        eprintln!(
            "error: claims are wrong: {} beads claimed twice ({:?}), {} of {} plain claims and {} of {} claim_next won",
            doubles.len(),
            doubles.iter().take(5).collect::<Vec<_>>(),
            claim.claims,
            args.beads,
            next.claims,
            args.beads
        );
        return Ok(false);
    }
    println!("ok: every bead claimed exactly once");
    Ok(true)
}
