//! `strand bench lease`: what leases cost, and how fast the leader's controller expires them.
//!
//! 1. Renewal overhead: `--agents` agents each take a bead with `claim_next`, hold it for
//!    `--hold`, and close it, for `--duration`: once with plain claims, once with leased claims
//!    renewed every third of `--lease`. It prints both phases' throughput and latencies and the
//!    leased phase's ratios to the plain one.
//! 2. Mass expiry: `--sweep-leases` beads are claimed with a `--sweep-lease` lease and left to
//!    lapse. Writers measure write latency before the first lease is due and while the
//!    controller expires them all, and it prints how long after the last lease was due the
//!    last one was expired.
//!
//! Each phase runs in a namespace of its own. It exits 1 when a bead was held by two agents, or
//! when a lease did not expire.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use api::client::{Client, ClientError};
use api::command::{Command, CreateBead, ReadyFilter};
use api::model::{Actor, Namespace};
use api::outcome::Outcome;
use clap::Args;
use hdrhistogram::Histogram;

use crate::bench::support::{agent_client, check_range, create_beads, latency_summary, new_histogram};
use crate::{Cli, CommandResult, Failure};

/// Most agents.
pub const LEASE_AGENTS_MAX: usize = 4096;
/// Most leases the mass expiry leaves to lapse.
pub const SWEEP_LEASES_MAX: usize = 2_000_000;
/// Writers that measure write latency during the mass expiry.
const WRITERS: usize = 8;
/// How long before the first lease is due the writers start (the baseline).
const BASELINE: Duration = Duration::from_secs(10);

#[derive(Args, Debug)]
pub struct LeaseArgs {
    /// Agents, each with its own client.
    #[arg(long, default_value_t = 128)]
    pub agents: usize,
    /// How long each overhead phase runs.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = crate::values::parse_duration)]
    pub duration: Duration,
    /// The lease of the leased phase (renewed every third of it).
    #[arg(long, default_value = "3s", value_name = "DURATION", value_parser = crate::values::parse_duration)]
    pub lease: Duration,
    /// How long an agent holds a bead before it closes it.
    #[arg(long, default_value = "3s", value_name = "DURATION", value_parser = crate::values::parse_duration)]
    pub hold: Duration,
    /// Leases left to lapse at once (0: skip the mass expiry).
    #[arg(long, default_value_t = 100_000)]
    pub sweep_leases: usize,
    /// Their lease: long enough for every claim to be made before the first is due.
    #[arg(long, default_value = "2m", value_name = "DURATION", value_parser = crate::values::parse_duration)]
    pub sweep_lease: Duration,
}

/// What one overhead phase measured.
struct Phase {
    claims: usize,
    renewals: usize,
    closes: usize,
    claim: Histogram<u64>,
    renew: Histogram<u64>,
    close: Histogram<u64>,
    elapsed: Duration,
    lost: usize,
}

impl Phase {
    fn new() -> Phase {
        Phase {
            claims: 0,
            renewals: 0,
            closes: 0,
            claim: new_histogram(),
            renew: new_histogram(),
            close: new_histogram(),
            elapsed: Duration::ZERO,
            lost: 0,
        }
    }

    /// Adds another agent's measurements.
    fn add(&mut self, other: Phase) -> Result<(), Failure> {
        self.claims += other.claims;
        self.renewals += other.renewals;
        self.closes += other.closes;
        self.lost += other.lost;
        for (into, from) in
            [(&mut self.claim, other.claim), (&mut self.renew, other.renew), (&mut self.close, other.close)]
        {
            into.add(from).map_err(|error| Failure::Refused(error.to_string()))?;
        }
        Ok(())
    }
}

fn micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX)
}

fn lease_ms(lease: Duration) -> u64 {
    u64::try_from(lease.as_millis()).unwrap_or(u64::MAX)
}

/// One agent of an overhead phase: claim, hold (renewing when leased), close, until `until`.
async fn hold_loop(
    client: Arc<Client>,
    agent: usize,
    label: String,
    lease: Option<Duration>,
    hold: Duration,
    until: Instant,
) -> Result<Phase, ClientError> {
    let mut phase = Phase::new();
    let actor = Actor(format!("lease-agent-{agent}"));
    while Instant::now() < until {
        let filter = ReadyFilter { labels_all: vec![label.clone()], unassigned: true, limit: 1, ..Default::default() };
        let started = Instant::now();
        let answer = client
            .execute(Command::ClaimNext(api::command::ClaimNext {
                actor: actor.clone(),
                filter,
                lease_ms: lease.map(lease_ms),
            }))
            .await?;
        phase.claim.saturating_record(micros(started));
        let Outcome::Beads(beads) = answer else { break };
        let Some(bead) = beads.into_iter().next() else { break };
        phase.claims += 1;
        let held_until = Instant::now() + hold;
        if let Some(lease) = lease {
            loop {
                let next = Instant::now() + lease / 3;
                if next >= held_until {
                    break;
                }
                tokio::time::sleep_until(next.into()).await;
                let started = Instant::now();
                match client
                    .execute(Command::LeaseRenew(api::command::LeaseRenew { id: bead.id.clone(), lease_id: None }))
                    .await
                {
                    Ok(_) => phase.renewals += 1,
                    Err(ClientError::Refused(_)) => phase.lost += 1,
                    Err(error) => return Err(error),
                }
                phase.renew.saturating_record(micros(started));
            }
        }
        tokio::time::sleep_until(held_until.into()).await;
        let started = Instant::now();
        match client.execute(Command::Close(api::command::Close { ids: vec![bead.id], reason: None })).await {
            Ok(_) => phase.closes += 1,
            Err(ClientError::Refused(_)) => phase.lost += 1,
            Err(error) => return Err(error),
        }
        phase.close.saturating_record(micros(started));
    }
    Ok(phase)
}

async fn overhead_phase(cli: &Cli, args: &LeaseArgs, leased: bool) -> Result<Phase, Failure> {
    let namespace = Namespace(format!("bench-lease-{:08x}", rand::random::<u32>()));
    let setup = agent_client(cli, &namespace)?;
    let rounds = (args.duration.as_secs_f64() / args.hold.as_secs_f64().max(0.001)).ceil() as usize + 1;
    let label = format!("{namespace}");
    create_beads(&setup, args.agents * rounds, &label).await?;
    let until = Instant::now() + args.duration;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for agent in 0..args.agents {
        // A lease is renewed by its holder: each agent's client writes as that agent.
        let client = Arc::new(cli.client_as(&namespace.0, &format!("lease-agent-{agent}"))?);
        let lease = leased.then_some(args.lease);
        tasks.push(tokio::spawn(hold_loop(client, agent, label.clone(), lease, args.hold, until)));
    }
    let mut total = Phase::new();
    for task in tasks {
        total.add(task.await.map_err(|error| Failure::Refused(error.to_string()))??)?;
    }
    total.elapsed = started.elapsed();
    Ok(total)
}

fn print_phase(name: &str, phase: &Phase) {
    let seconds = phase.elapsed.as_secs_f64().max(1e-9);
    let writes = phase.claims + phase.renewals + phase.closes;
    println!(
        "{name:<7} claims={} renewals={} closes={} writes/s={:.0}  claim {}  close {}",
        phase.claims,
        phase.renewals,
        phase.closes,
        writes as f64 / seconds,
        latency_summary(&phase.claim),
        latency_summary(&phase.close),
    );
    if phase.renewals > 0 {
        println!("        renew {}", latency_summary(&phase.renew));
    }
}

/// The leader's count of held leases, across namespaces.
async fn leases_held(client: &Client) -> Result<u64, Failure> {
    let status = client.status(false).await?;
    let leader = status.nodes.iter().find(|node| node.id == status.leader_id);
    Ok(leader.map_or(0, |node| node.lease_count))
}

async fn mass_expiry(cli: &Cli, args: &LeaseArgs) -> CommandResult {
    let namespace = Namespace(format!("bench-sweep-{:08x}", rand::random::<u32>()));
    let setup = agent_client(cli, &namespace)?;
    let before = leases_held(&setup).await?;
    println!("mass expiry: creating {} beads", args.sweep_leases);
    let label = format!("{namespace}");
    create_beads(&setup, args.sweep_leases, &label).await?;
    let lease = lease_ms(args.sweep_lease);
    let first_grant = Instant::now();
    let claimed = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for agent in 0..args.agents {
        let (client, label, claimed) = (agent_client(cli, &namespace)?, label.clone(), claimed.clone());
        tasks.push(tokio::spawn(async move {
            let actor = Actor(format!("sweeper-{agent}"));
            loop {
                let filter =
                    ReadyFilter { labels_all: vec![label.clone()], unassigned: true, limit: 1, ..Default::default() };
                match client
                    .execute(Command::ClaimNext(api::command::ClaimNext {
                        actor: actor.clone(),
                        filter,
                        lease_ms: Some(lease),
                    }))
                    .await?
                {
                    Outcome::Beads(beads) if !beads.is_empty() => claimed.fetch_add(1, Ordering::Relaxed),
                    _ => return Ok::<_, ClientError>(()),
                };
            }
        }));
    }
    for task in tasks {
        task.await.map_err(|error| Failure::Refused(error.to_string()))??;
    }
    let last_grant = Instant::now();
    let claimed = claimed.load(Ordering::Relaxed);
    println!(
        "claimed {claimed} with a {} lease in {:.1} s",
        humantime::format_duration(args.sweep_lease),
        (last_grant - first_grant).as_secs_f64()
    );
    let first_due = first_grant + args.sweep_lease;
    if last_grant >= first_due {
        println!(
            "warning: the claims took longer than the lease, so expiries began while claiming; give a longer --sweep-lease"
        );
    }
    tokio::time::sleep_until(first_due.checked_sub(BASELINE).unwrap_or(first_due).into()).await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for _ in 0..WRITERS {
        let (client, stop) = (agent_client(cli, &namespace)?, stop.clone());
        writers.push(tokio::spawn(async move {
            let (mut baseline, mut during) = (new_histogram(), new_histogram());
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                client.execute(Command::Create(CreateBead { title: "write".into(), ..Default::default() })).await?;
                let into = if started < first_due { &mut baseline } else { &mut during };
                into.saturating_record(micros(started));
            }
            Ok::<_, ClientError>((baseline, during))
        }));
    }
    let deadline = last_grant + args.sweep_lease + Duration::from_secs(120);
    let done = loop {
        let held = leases_held(&setup).await?;
        if held <= before {
            break Some(Instant::now());
        }
        if Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    stop.store(true, Ordering::Relaxed);
    let (mut baseline, mut during) = (new_histogram(), new_histogram());
    for writer in writers {
        let (before_due, while_sweeping) = writer.await.map_err(|error| Failure::Refused(error.to_string()))??;
        baseline.add(before_due).map_err(|error| Failure::Refused(error.to_string()))?;
        during.add(while_sweeping).map_err(|error| Failure::Refused(error.to_string()))?;
    }
    let Some(done) = done else {
        eprintln!("error: leases were still held 2 minutes after the last one was due");
        return Ok(false);
    };
    let last_due = last_grant + args.sweep_lease;
    println!(
        "expired {claimed} leases: the last {:.2} s after the last was due; {:.1} s from the first due to the last expired (the grants spanned {:.1} s)",
        done.saturating_duration_since(last_due).as_secs_f64(),
        (done - first_due).as_secs_f64(),
        (last_grant - first_grant).as_secs_f64()
    );
    println!("writes before the first was due: {}", latency_summary(&baseline));
    println!("writes while they expired:       {}", latency_summary(&during));
    if !baseline.is_empty() && !during.is_empty() {
        println!(
            "write p99 while expiring / before: {:.2}",
            during.value_at_quantile(0.99) as f64 / baseline.value_at_quantile(0.99).max(1) as f64
        );
    }
    Ok(true)
}

/// Runs `strand bench lease`.
pub async fn run(cli: &Cli, args: &LeaseArgs) -> CommandResult {
    check_range("--agents", args.agents, 1, LEASE_AGENTS_MAX)?;
    check_range("--sweep-leases", args.sweep_leases, 0, SWEEP_LEASES_MAX)?;
    if !(api::limits::LEASE_MS_MIN..=api::limits::LEASE_MS_MAX).contains(&lease_ms(args.lease))
        || !(api::limits::LEASE_MS_MIN..=api::limits::LEASE_MS_MAX).contains(&lease_ms(args.sweep_lease))
    {
        return Err(Failure::Usage("--lease and --sweep-lease must be between 1s and 7d".into()));
    }
    let plain = overhead_phase(cli, args, false).await?;
    print_phase("plain", &plain);
    let leased = overhead_phase(cli, args, true).await?;
    print_phase("leased", &leased);
    let p99 = |phase: &Phase| phase.claim.value_at_quantile(0.99).max(1) as f64;
    let rate = |phase: &Phase| (phase.claims + phase.closes) as f64 / phase.elapsed.as_secs_f64().max(1e-9);
    println!(
        "leased / plain: claim p99 {:.2}, claims+closes per second {:.2}, writes per claim {:.2} (renewals add {:.2})",
        p99(&leased) / p99(&plain),
        rate(&leased) / rate(&plain).max(1e-9),
        (leased.claims + leased.renewals + leased.closes) as f64 / leased.claims.max(1) as f64,
        leased.renewals as f64 / leased.claims.max(1) as f64,
    );
    if plain.lost + leased.lost > 0 {
        eprintln!(
            "error: {} renewals or closes were refused: a lease was lost while its agent held it",
            plain.lost + leased.lost
        );
        return Ok(false);
    }
    if args.sweep_leases == 0 {
        return Ok(true);
    }
    mass_expiry(cli, args).await
}
