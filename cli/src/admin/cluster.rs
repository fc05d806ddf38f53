//! `strand cluster status`: members, leader, term, log and applied indexes per node, which node
//! runs the controller, when each of its duties last ran, and a note on a member that is not
//! catching up or is rejoining. `strand cluster move-leader ID`: moves the leadership to another
//! voter and returns once it leads. `strand member list`: each member's addresses, role, and
//! replication as the leader's member watch last saw it. `strand member add|promote|remove`:
//! membership changes, made by the leader through joint consensus.

use api::printable::printable;
use api::status::{apply_version, controller};
use clap::Subcommand;
use serde_json::json;

use crate::{Cli, CommandResult};

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Members, leader, term, last log index and applied index of every node.
    Status {
        /// Also compute each node's state digest (equal digests: equal states).
        #[arg(long)]
        digest: bool,
    },
    /// Move the leadership to another voter (as `etcdctl move-leader`); returns once it leads.
    /// Refused for an unknown id, a learner, and a member that is unreachable, rejoining or far
    /// behind. Needs an admin token when auth is on.
    MoveLeader {
        /// The id of the voter that is to lead.
        #[arg(value_parser = crate::values::parse_node_id)]
        id: u64,
        /// How long to wait for it to lead, e.g. 10s (at most 2m).
        #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::values::parse_duration)]
        wait: std::time::Duration,
    },
    /// The cluster's apply version (the version of the rules log entries apply by), each
    /// member's build and the apply versions it applies, and the version the leader would switch
    /// to. With a subcommand: pin it, unpin it, or lower it (admin token when auth is on).
    Version {
        #[command(subcommand)]
        action: Option<VersionAction>,
    },
    /// Take a consistency checkpoint now: every member takes a digest of its state at the same
    /// log entry. Shows each member's digest and exits 1 when one differs or does not answer
    /// (the leader also raises its divergence alarm). Needs an admin token when auth is on.
    Check,
}

/// Changes of the apply version.
#[derive(Subcommand, Debug)]
pub enum VersionAction {
    /// Hold the apply version where it is: the leader no longer raises it (before a downgrade).
    Pin,
    /// Let the leader raise it again once every member applies a higher version.
    Unpin,
    /// Lower the apply version to VERSION and pin it there. Refused, naming the member, when a
    /// member's build cannot apply VERSION, and above the current version.
    Set {
        /// The apply version to lower to.
        version: u32,
    },
}

#[derive(Subcommand, Debug)]
pub enum MemberCommand {
    /// Every member: id, client and peer addresses, role (voter or learner), whether it leads, the
    /// index the leader knows its log to match, its lag behind the leader, and whether it answered
    /// the leader's last status request (once a second).
    List,
    /// Add a member (as `etcdctl member add`). It always enters as a learner, which the quorum
    /// never waits for; the leader promotes it to a voter once it has stayed caught up for the
    /// stabilization time (10 s), unless --learner. Then start it with `strand node --join`.
    /// Needs an admin token when auth is on.
    Add {
        /// The new member's id: one no member has, and never one a removed member had.
        #[arg(value_parser = crate::values::parse_node_id)]
        id: u64,
        /// Where the other members reach its peer listener, HOST:PORT.
        #[arg(value_parser = crate::values::parse_host_port)]
        peer_address: String,
        /// Where clients reach it, HOST:PORT (it reports it itself once it runs).
        #[arg(long, value_name = "ADDR", value_parser = crate::values::parse_host_port)]
        client_address: Option<String>,
        /// Keep it a learner until `strand member promote`.
        #[arg(long)]
        learner: bool,
    },
    /// Make a learner a voter. Refused while it is unreachable or far behind the leader.
    Promote {
        /// The learner's id.
        #[arg(value_parser = crate::values::parse_node_id)]
        id: u64,
    },
    /// Remove a member, voter or learner; the leader itself hands its leadership over first.
    /// The removed node stops serving and never starts again on its data directory.
    Remove {
        /// The member's id.
        #[arg(value_parser = crate::values::parse_node_id)]
        id: u64,
    },
}

/// One member as `member list` shows it.
struct MemberRow<'s> {
    node: &'s api::proto::NodeStatus,
    /// Where clients reach it: as it reported itself, else as the membership holds it (the
    /// `--client-address` it was added with, until it runs); empty when neither says.
    client_address: &'s str,
    role: &'static str,
    leader: bool,
    match_index: Option<u64>,
    lag: Option<u64>,
    reachable: Option<bool>,
}

/// The members of `status`, with the leader's view of each one's replication (`None` where no
/// leader answered, or it has not looked at the member yet).
fn member_rows(status: &api::proto::StatusResponse) -> Vec<MemberRow<'_>> {
    let leader = status.nodes.iter().find(|node| node.id == status.leader_id && node.state == "leader");
    // The membership's client addresses, the leader's first, for members that did not answer.
    let memberships = leader.into_iter().chain(&status.nodes).flat_map(|node| &node.membership);
    let stored = |id: u64| {
        memberships
            .clone()
            .find(|member| member.id == id && !member.client_address.is_empty())
            .map_or("", |member| member.client_address.as_str())
    };
    status
        .nodes
        .iter()
        .map(|node| {
            let role = if status.voters.contains(&node.id) { "voter" } else { "learner" };
            let is_leader = leader.is_some_and(|leader| leader.id == node.id);
            let progress = leader.and_then(|leader| leader.members.iter().find(|member| member.id == node.id));
            let (match_index, lag, reachable) = match (is_leader, progress) {
                (true, _) => (Some(node.last_log_index), Some(0), Some(true)),
                (false, Some(member)) => (Some(member.match_index), Some(member.lag), Some(member.reachable)),
                (false, None) => (None, None, None),
            };
            let client_address =
                if node.client_address.is_empty() { stored(node.id) } else { node.client_address.as_str() };
            MemberRow { node, client_address, role, leader: is_leader, match_index, lag, reachable }
        })
        .collect()
}

/// Runs a member command.
pub async fn run_member(cli: &Cli, command: &MemberCommand) -> CommandResult {
    let client = cli.client()?;
    let (changed, what) = match command {
        MemberCommand::List => return member_list(cli).await,
        MemberCommand::Add { id, peer_address, client_address, learner } => {
            let request = api::proto::AddMemberRequest {
                id: *id,
                peer_address: peer_address.clone(),
                client_address: client_address.clone().unwrap_or_default(),
                learner: *learner,
            };
            let promoted = if *learner {
                "it stays a learner until `strand member promote`"
            } else {
                "the leader promotes it once it has stayed caught up"
            };
            let what =
                format!("added node {id} as a learner; start it with `strand node --id {id} --join ...`; {promoted}");
            (client.add_member(request).await?, what)
        }
        MemberCommand::Promote { id } => (client.promote_member(*id).await?, format!("node {id} is a voter")),
        MemberCommand::Remove { id } => (client.remove_member(*id).await?, format!("removed node {id}")),
    };
    let members: Vec<_> = changed
        .members
        .iter()
        .map(|member| {
            json!({
                "id": member.id, "peer_address": member.peer_address, "client_address": member.client_address,
                "role": if member.voter { "voter" } else { "learner" }, "auto_promote": member.auto_promote,
            })
        })
        .collect();
    if cli.json {
        crate::output::print_value(
            &json!({ "index": changed.index, "leader_id": changed.leader_id, "members": members }),
        );
        return Ok(true);
    }
    println!("{what} (membership at index {})", changed.index);
    for member in &changed.members {
        let role = if member.voter {
            "voter"
        } else if member.auto_promote {
            "learner (promoted once caught up)"
        } else {
            "learner"
        };
        println!("{:>4}  {:<22} {}", member.id, member.peer_address, role);
    }
    Ok(true)
}

/// `strand member list`.
async fn member_list(cli: &Cli) -> CommandResult {
    let status = cli.client()?.status(false).await?;
    let rows = member_rows(&status);
    if cli.json {
        let members: Vec<_> = rows
            .iter()
            .map(|row| {
                json!({
                    "id": row.node.id, "client_address": row.client_address, "peer_address": row.node.address,
                    "role": row.role, "leader": row.leader, "match_index": row.match_index, "lag": row.lag,
                    "reachable": row.reachable,
                    "version": (!row.node.build.is_empty()).then_some(&row.node.build),
                })
            })
            .collect();
        crate::output::print_value(&json!({ "leader_id": status.leader_id, "term": status.term, "members": members }));
        return Ok(true);
    }
    let shown = |value: Option<u64>| value.map_or("?".to_string(), |value| value.to_string());
    println!(
        "{:>4}  {:<22} {:<22} {:<8} {:<7} {:>10} {:>8}  reachable",
        "id", "client", "peer", "role", "leader", "match", "lag"
    );
    for row in &rows {
        println!(
            "{:>4}  {:<22} {:<22} {:<8} {:<7} {:>10} {:>8}  {}",
            row.node.id,
            if row.client_address.is_empty() { "?" } else { row.client_address },
            row.node.address,
            row.role,
            if row.leader { "yes" } else { "" },
            shown(row.match_index),
            shown(row.lag),
            row.reachable.map_or("?", |reachable| if reachable { "yes" } else { "no" }),
        );
    }
    Ok(true)
}

/// Runs a cluster command.
pub async fn run(cli: &Cli, command: &ClusterCommand) -> CommandResult {
    match command {
        ClusterCommand::Status { digest } => status(cli, *digest).await,
        ClusterCommand::MoveLeader { id, wait } => move_leader(cli, *id, *wait).await,
        ClusterCommand::Version { action: None } => version(cli).await,
        ClusterCommand::Version { action: Some(action) } => change_version(cli, action).await,
        ClusterCommand::Check => check(cli).await,
    }
}

/// How long `cluster check` waits for every member to apply its checkpoint.
const CHECK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// How long it goes on waiting while a member still digests one (a digest of the disk, taken
/// beside apply, grows with the state: seconds per million beads).
const DIGEST_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

async fn check(cli: &Cli) -> CommandResult {
    let client = cli.client()?;
    let before = client.status(false).await?;
    let mark = before.nodes.iter().map(|node| node.applied_index).max().unwrap_or(0);
    let check = api::commands::consistency_check::ConsistencyCheck {};
    client.execute(api::command::Command::ConsistencyCheck(check)).await?;
    let started = std::time::Instant::now();
    let mut told = false;
    // The checkpoint is the lowest past the mark that every answering member took.
    let (status, index) = loop {
        let status = client.status(false).await?;
        let answering: Vec<_> = status.nodes.iter().filter(|node| node.apply_max > 0).collect();
        let taken = |node: &&api::proto::NodeStatus| {
            node.checkpoints.iter().map(|checkpoint| checkpoint.index).filter(|index| *index > mark).min()
        };
        let indexes: Vec<Option<u64>> = answering.iter().map(taken).collect();
        let index = indexes.iter().copied().collect::<Option<Vec<u64>>>().and_then(|all| all.into_iter().max());
        let everyone = answering.len() == status.nodes.len();
        let digesting: Vec<u64> = answering
            .iter()
            .filter(|node| taken(node).is_none() && node.digesting.iter().any(|index| *index > mark))
            .map(|node| node.id)
            .collect();
        let waited = started.elapsed();
        let out_of_time = waited >= CHECK_WAIT && (digesting.is_empty() || waited >= DIGEST_WAIT);
        if (index.is_some() && everyone) || out_of_time {
            break (status, index);
        }
        if waited >= CHECK_WAIT && !told {
            eprintln!("waiting for nodes {digesting:?} to finish digesting the checkpoint (up to {DIGEST_WAIT:?})");
            told = true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let digest_at = |node: &api::proto::NodeStatus, index: u64| {
        node.checkpoints.iter().find(|checkpoint| checkpoint.index == index).map(|checkpoint| checkpoint.digest)
    };
    let leader = status.nodes.iter().find(|node| node.id == status.leader_id);
    let reference = index.and_then(|index| leader.and_then(|leader| digest_at(leader, index)));
    let rows: Vec<(u64, Option<u64>, &str)> = status
        .nodes
        .iter()
        .map(|node| {
            let digest = index.and_then(|index| digest_at(node, index));
            let past = index.is_some_and(|index| node.applied_index >= index);
            let verdict = match (digest, reference) {
                (None, _) if past => "skipped it: caught up from a snapshot past it",
                (None, _) => "did not take it in time",
                (Some(_), None) => "no reference: the leader did not take it",
                (Some(digest), Some(reference)) if digest != reference => "DIFFERS from the leader's",
                (Some(_), Some(_)) => "agrees",
            };
            (node.id, digest, verdict)
        })
        .collect();
    let agree = index.is_some() && reference.is_some() && rows.iter().all(|(_, _, verdict)| *verdict == "agrees");
    if cli.json {
        let nodes: Vec<_> = rows
            .iter()
            .map(|(id, digest, verdict)| {
                json!({ "id": id, "digest": digest.map(|digest| format!("{digest:016x}")), "verdict": verdict })
            })
            .collect();
        crate::output::print_value(&json!({ "index": index, "agree": agree, "nodes": nodes }));
    } else {
        match index {
            Some(index) => println!("checkpoint at log index {index}"),
            None => println!("no checkpoint past log index {mark} reached every member within {CHECK_WAIT:?}"),
        }
        for (id, digest, verdict) in &rows {
            let digest = digest.map_or("-".to_string(), |digest| format!("{digest:016x}"));
            println!("{id:>4}  {digest:<16}  {verdict}");
        }
        if agree {
            println!("every member holds the same state at that index");
        }
    }
    Ok(agree)
}

/// The highest version every member applies (`Err`: a member that did not answer).
fn switch_target(status: &api::proto::StatusResponse) -> Result<u32, String> {
    let mut target = u32::MAX;
    for node in &status.nodes {
        if node.apply_max == 0 {
            return Err(format!("node {} did not answer", node.id));
        }
        target = target.min(node.apply_max);
    }
    if target == u32::MAX { Err("no node answered".into()) } else { Ok(target) }
}

async fn version(cli: &Cli) -> CommandResult {
    let status = cli.client()?.status(false).await?;
    let current = apply_version(&status);
    let target = switch_target(&status);
    if cli.json {
        let nodes: Vec<_> = status
            .nodes
            .iter()
            .map(|node| {
                let answered = node.apply_max > 0;
                json!({
                    "id": node.id, "state": node.state, "build": answered.then_some(&node.build),
                    "apply_min": answered.then_some(node.apply_min), "apply_max": answered.then_some(node.apply_max),
                    "apply_version": answered.then_some(node.apply_version), "error": node.error,
                })
            })
            .collect();
        crate::output::print_value(&json!({
            "apply_version": current.map(|(version, _)| version),
            "pinned": current.map(|(_, pinned)| pinned),
            "switch_to": target.as_ref().ok(),
            "switch_blocked_by": target.as_ref().err(),
            "nodes": nodes,
        }));
        return Ok(true);
    }
    match current {
        Some((version, pinned)) => {
            let pin = if pinned { ", pinned (`strand cluster version unpin` lets it rise)" } else { "" };
            println!("apply version {version}{pin}");
            match &target {
                Ok(target) if *target > version && !pinned => {
                    println!("every member applies version {target}: the leader switches to it within a second")
                }
                Ok(target) if *target > version => {
                    println!("every member applies version {target}; pinned at {version}")
                }
                Ok(_) => println!("no higher version: every member applies at most {version}"),
                Err(why) => println!("the leader switches to no other version while {why}"),
            }
        }
        None => println!("apply version unknown: no node answered"),
    }
    println!("{:>4}  {:<12} {:<24} {:>8} {:>6}  notes", "id", "state", "build", "applies", "state@");
    for node in &status.nodes {
        let (build, range, at) = if node.apply_max == 0 {
            ("?".to_string(), "?".to_string(), "?".to_string())
        } else {
            (node.build.clone(), format!("{}-{}", node.apply_min, node.apply_max), node.apply_version.to_string())
        };
        println!(
            "{:>4}  {:<12} {:<24} {:>8} {:>6}  {}",
            node.id,
            node.state,
            printable(&build),
            range,
            at,
            printable(&node.error)
        );
    }
    Ok(true)
}

async fn change_version(cli: &Cli, action: &VersionAction) -> CommandResult {
    use api::commands::apply_version::ApplyVersionChange;
    let change = match action {
        VersionAction::Pin => ApplyVersionChange::Pin,
        VersionAction::Unpin => ApplyVersionChange::Unpin,
        VersionAction::Set { version } => ApplyVersionChange::Set { to: *version },
    };
    cli.client()?.execute(api::command::Command::ApplyVersion(change)).await?;
    let status = cli.client()?.status(false).await?;
    let current = apply_version(&status);
    if cli.json {
        crate::output::print_value(&json!({
            "apply_version": current.map(|(version, _)| version), "pinned": current.map(|(_, pinned)| pinned),
        }));
    } else if let Some((version, pinned)) = current {
        println!("apply version {version}, {}", if pinned { "pinned" } else { "not pinned" });
    }
    Ok(true)
}

async fn move_leader(cli: &Cli, id: u64, wait: std::time::Duration) -> CommandResult {
    let moved = cli.client_waiting(wait)?.move_leader(id, wait).await?;
    if cli.json {
        crate::output::print_value(&json!({
            "previous_leader_id": moved.previous_leader_id, "leader_id": moved.leader_id, "term": moved.term,
        }));
    } else if moved.previous_leader_id == moved.leader_id {
        println!("node {} already leads (term {})", moved.leader_id, moved.term);
    } else {
        println!(
            "leadership moved from node {} to node {} (term {})",
            moved.previous_leader_id, moved.leader_id, moved.term
        );
    }
    Ok(true)
}

async fn status(cli: &Cli, digest: bool) -> CommandResult {
    let status = cli.client()?.status(digest).await?;
    if cli.json {
        let nodes: Vec<_> = status
            .nodes
            .iter()
            .map(|node| {
                json!({
                    "id": node.id, "client_address": node.client_address, "peer_address": node.address, "state": node.state, "term": node.term,
                    "last_log_index": node.last_log_index, "applied_index": node.applied_index,
                    "snapshot_index": node.snapshot_index, "purged_index": node.purged_index,
                    "leader_id": node.leader_id, "digest": node.digest.map(|digest| format!("{digest:016x}")),
                    "bead_count": node.bead_count, "fatal_error": node.fatal_error, "error": node.error,
                    "controller_term": node.controller_term, "lease_count": node.lease_count,
                    "rejoining": node.rejoining, "lag": node.lag, "note": node.note,
                    "apply_version": node.apply_version, "apply_min": node.apply_min, "apply_max": node.apply_max,
                    "build": node.build, "divergence": node.divergence,
                    "duties": node.duties.iter().map(|duty| json!({
                        "name": duty.name, "interval_ms": duty.interval_ms,
                        "last_run": duty.last_run_ms.map(|ms| api::model::Timestamp(ms).to_rfc3339()),
                        "last_result": duty.last_result,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let value = json!({
            "leader_id": status.leader_id, "term": status.term, "voters": status.voters,
            "controller": controller(&status), "nodes": nodes,
        });
        crate::output::print_value(&value);
        return Ok(true);
    }
    let leader = if status.leader_id == 0 { "none".to_string() } else { status.leader_id.to_string() };
    let version = apply_version(&status).map_or("?".to_string(), |(version, _)| version.to_string());
    println!("leader {leader}, term {}, voters {:?}, apply version {version}", status.term, status.voters);
    match controller(&status) {
        Some(node) => {
            let leases = status.nodes.iter().find(|each| each.id == node).map_or(0, |each| each.lease_count);
            println!("controller on node {node} (term {}), {leases} leases held", status.term);
            let duties = status.nodes.iter().find(|each| each.id == node).map(|each| each.duties.as_slice());
            let now = crate::values::now_ms();
            for duty in duties.unwrap_or_default() {
                let every = std::time::Duration::from_millis(duty.interval_ms);
                let last = match duty.last_run_ms {
                    Some(ms) => {
                        let ago = std::time::Duration::from_millis(now.saturating_sub(ms).max(0) as u64 / 100 * 100);
                        let result = printable(&duty.last_result);
                        format!("last ran {} ago: {result}", api::go_duration::format_go_duration(ago))
                    }
                    None if duty.interval_ms == 0 => "off".into(),
                    None => "not run yet".into(),
                };
                let interval = if duty.interval_ms == 0 {
                    String::new()
                } else {
                    format!("every {}, ", api::go_duration::format_go_duration(every))
                };
                println!("  {:<13} {interval}{last}", duty.name);
            }
        }
        None => println!("controller: none running yet (no leader, or its controller has not begun)"),
    }
    println!(
        "{:>4}  {:<22} {:<22} {:<12} {:>6} {:>10} {:>10} {:>10}  notes",
        "id", "client", "peer", "state", "term", "last_log", "applied", "snapshot"
    );
    for node in &status.nodes {
        let mut notes = Vec::new();
        if let Some(digest) = node.digest {
            notes.push(format!("digest {digest:016x}"));
        }
        if !node.fatal_error.is_empty() {
            notes.push(format!("FATAL: {}", node.fatal_error));
        }
        if !node.divergence.is_empty() {
            notes.push(format!("DIVERGENCE: {}", node.divergence));
        }
        if node.rejoining {
            notes.push("rejoining: does not vote until caught up".into());
        }
        if !node.note.is_empty() {
            notes.push(node.note.clone());
        }
        if !node.error.is_empty() {
            notes.push(node.error.clone());
        }
        println!(
            "{:>4}  {:<22} {:<22} {:<12} {:>6} {:>10} {:>10} {:>10}  {}",
            node.id,
            if node.client_address.is_empty() { "?" } else { &node.client_address },
            node.address,
            node.state,
            node.term,
            node.last_log_index,
            node.applied_index,
            node.snapshot_index,
            printable(&notes.join("; "))
        );
    }
    println!("{}", builds_line(&status));
    Ok(true)
}

/// The builds the members run, as one line: `build B on every member`, or each member's.
fn builds_line(status: &api::proto::StatusResponse) -> String {
    let answered: Vec<_> = status.nodes.iter().filter(|node| !node.build.is_empty()).collect();
    let first = answered.first().map(|node| node.build.as_str());
    match first {
        None => "build: no member answered".into(),
        Some(build) if answered.len() == status.nodes.len() && answered.iter().all(|node| node.build == build) => {
            format!("build {} on every member", printable(build))
        }
        Some(_) => {
            let each: Vec<String> = status
                .nodes
                .iter()
                .map(|node| {
                    let build = if node.build.is_empty() { "?" } else { node.build.as_str() };
                    format!("node {} {}", node.id, printable(build))
                })
                .collect();
            format!("builds: {}", each.join(", "))
        }
    }
}
