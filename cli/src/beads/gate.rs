//! bd's `gate` commands. A gate is a bead of type `gate` that blocks a step (a `blocks` edge from
//! the step) until its condition holds: a person resolves it (`human`), its timeout runs out
//! (`timer`), a GitHub workflow run or pull request finishes (`gh:run`, `gh:pr`, asked of the
//! `gh` CLI as bd asks it), or another bead closes (`bead`). Its await fields live in metadata
//! (see `gate_fields`).
//!
//! `gate check` evaluates the open gates and closes those whose condition holds, each close
//! conditional on the revision it judged, so a gate changed meanwhile is left for the next
//! check. Gas City's gate-sweep order runs `gate check --type=timer --escalate`, then
//! `gate list --type=condition|gh --status=open --json` and `gate close ID --reason ...`;
//! bd has no `--type`/`--status` on `gate list` nor `gate close`, so with bd those steps fail
//! quietly, and with Strand they do what the script means.
//!
//! Text output escapes what agents and tools wrote (titles, await ids, waiters, `gh`'s answers)
//! through `api::printable`, so none of it adds a line or drives the terminal.

use std::process::Stdio;
use std::time::Duration;

use api::client::Client;
use api::command::{Command, CreateBead, ListFilter, Query, Txn};
use api::commands::get::Lookup;
use api::model::{Bead, BeadId, DepType, Status};
use api::printable::{printable, printable_block};
use clap::{Args, Subcommand};
use serde::Deserialize;

use crate::answers::{beads_of, one_bead};
use crate::beads::gate_fields::{
    AWAIT_ID_KEY, AWAIT_TYPE_KEY, GATE_TYPE, GATE_TYPES, GateFields, REF_KEY, TIMEOUT_KEY, WAITERS_KEY,
};
use crate::beads::listing::{Listing, LocalFilter, SortOrder};
use crate::beads::statuses_arg;
use crate::output::{BLOCK_INDENT, print_bead_object, print_beads, print_value};
use crate::values::now_ms;
use crate::{Cli, CommandResult, Failure};
use api::go_duration::{format_go_duration, parse_go_duration};

/// `strand gate ...`.
#[derive(Subcommand, Debug)]
pub enum GateCommand {
    /// Open gates; with --all, closed ones too (JSON: an array of gate beads).
    List(GateListArgs),
    /// Create a gate that blocks a bead until it is resolved; `--timeout 2h` (Go's syntax: 30m,
    /// 1h30m) is how long after creation a timer gate resolves (JSON: the gate).
    Create(GateCreateArgs),
    /// One gate, with its await fields and waiters (JSON: the gate).
    Show {
        /// The gate.
        id: String,
    },
    /// Close a gate by hand, which unblocks the step waiting on it (JSON: the gate).
    #[command(visible_alias = "close")]
    Resolve {
        /// The gate.
        id: String,
        /// Why it was resolved.
        #[arg(long, short)]
        reason: Option<String>,
    },
    /// Evaluate open gates and close those whose condition holds: timers past their timeout,
    /// GitHub runs that succeeded and pull requests merged (via `gh`), beads of this store that
    /// closed. Human gates are left for `gate resolve` (JSON: {checked, resolved, escalated,
    /// errors, dry_run}).
    Check(GateCheckArgs),
    /// Register a waiter (an agent's address) on a gate.
    AddWaiter {
        /// The gate.
        id: String,
        /// The waiter.
        waiter: String,
    },
}

/// `gate list`.
#[derive(Args, Debug)]
pub struct GateListArgs {
    /// Closed gates too.
    #[arg(long, short)]
    all: bool,
    /// At most this many (0: no limit).
    #[arg(long, short = 'n', default_value_t = 50)]
    limit: u32,
    /// Only gates awaiting this type (`gh` means every `gh:` type).
    #[arg(long = "type", short = 't', value_name = "TYPE")]
    await_type: Option<String>,
    /// Only gates in these statuses (comma-separated, or `all`).
    #[arg(long)]
    status: Option<String>,
}

/// `gate create`.
#[derive(Args, Debug)]
pub struct GateCreateArgs {
    /// The bead the gate blocks.
    #[arg(long, required = true)]
    blocks: String,
    /// What the gate waits for: human, timer, gh:run, gh:pr, bead (another type is refused).
    #[arg(long = "type", short = 't', default_value = "human", value_name = "TYPE")]
    await_type: String,
    /// Why the gate is there (kept in its description).
    #[arg(long, short)]
    reason: Option<String>,
    /// What it waits on: a run id or workflow name, a PR number, `<rig>:<bead-id>`.
    #[arg(long)]
    await_id: Option<String>,
    // `--timeout` (how long after creation a timer gate resolves, in Go's syntax: 2h, 30m,
    // 1h30m) is the global flag's spelling; `Cli::gate_timeout` reads it.
}

/// `gate check`.
#[derive(Args, Debug)]
pub struct GateCheckArgs {
    /// Only gates of this await type: gh (every gh: type), gh:run, gh:pr, timer, bead, all.
    #[arg(long = "type", short = 't', value_name = "TYPE")]
    await_type: Option<String>,
    /// Say what would happen, and change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Escalate failed gates with `gt escalate`.
    #[arg(long, short)]
    escalate: bool,
    /// At most this many open gates are evaluated.
    #[arg(long, short, default_value_t = 100)]
    limit: u32,
}

/// Whether a gate's await type matches a `--type` filter (bd's rule: `gh` is every `gh:` type,
/// `all` or nothing is every type).
fn type_matches(await_type: &str, filter: Option<&str>) -> bool {
    match filter {
        None | Some("" | "all") => true,
        Some("gh") => await_type.starts_with("gh:"),
        Some(filter) => await_type == filter,
    }
}

/// The gate beads of the namespace in `statuses` (every status when `all`, else every one but
/// closed), bd's default order.
async fn gates(client: &Client, statuses: Vec<Status>, all: bool) -> Result<Vec<Bead>, Failure> {
    let listing = Listing {
        filter: ListFilter { statuses, bead_type: Some(GATE_TYPE.into()), all, ..ListFilter::default() },
        local: LocalFilter::default(),
        sort: SortOrder::parse("", false)?,
        offset: 0,
        limit: 0,
    };
    listing.run(client).await
}

/// Every status but closed.
fn not_closed() -> Vec<Status> {
    Status::ALL.iter().copied().filter(|status| *status != Status::Closed).collect()
}

/// One gate; a bead of another type is refused.
async fn gate(client: &Client, id: &str) -> Result<Bead, Failure> {
    let found = beads_of(client.query(Query::from(Lookup { ids: vec![BeadId::from(id)] })).await?);
    let bead = found
        .into_iter()
        .next()
        .ok_or_else(|| Failure::Refused(format!("gate not found: {id}; list gates with `strand gate list`")))?;
    if bead.bead_type != GATE_TYPE {
        return Err(Failure::Refused(format!(
            "{id} is not a gate issue (type={}); close it with `strand close`",
            bead.bead_type
        )));
    }
    Ok(bead)
}

/// Runs a `gate` command.
pub async fn run(cli: &Cli, command: &GateCommand) -> CommandResult {
    let client = cli.client()?;
    match command {
        GateCommand::List(args) => {
            let statuses = match &args.status {
                Some(text) => statuses_arg(text)?,
                None if args.all => Vec::new(),
                None => not_closed(),
            };
            let mut found = gates(&client, statuses, true).await?;
            found.retain(|bead| {
                let fields = GateFields::of(bead).unwrap_or_default();
                type_matches(&fields.await_type, args.await_type.as_deref())
            });
            if args.limit > 0 {
                found.truncate(args.limit as usize);
            }
            if cli.json {
                print_beads(&found, true);
            } else {
                print_gates(&found);
            }
            Ok(true)
        }
        GateCommand::Create(args) => create(cli, &client, args).await,
        GateCommand::Show { id } => {
            let bead = gate(&client, id).await?;
            if cli.json {
                print_bead_object(&bead, true);
            } else {
                print_gate_details(&bead);
            }
            Ok(true)
        }
        GateCommand::Resolve { id, reason } => {
            let bead = gate(&client, id).await?;
            let close = Command::Close(api::command::Close { ids: vec![bead.id.clone()], reason: reason.clone() });
            let closed = one_bead(client.execute(close).await?, "gate")?;
            if cli.json {
                print_bead_object(&closed, true);
            } else {
                println!("✓ Gate resolved: {}", printable(id));
                if let Some(reason) = reason {
                    println!("  Reason: {}", printable(reason));
                }
            }
            Ok(true)
        }
        GateCommand::Check(args) => check(cli, &client, args).await,
        GateCommand::AddWaiter { id, waiter } => add_waiter(&client, id, waiter).await,
    }
}

/// Refuses an await type no check resolves (a usage error, before anything is sent): a gate of
/// it would block its step until someone resolved it by hand, which `human` says outright.
fn check_gate_type(await_type: &str) -> Result<(), Failure> {
    if GATE_TYPES.contains(&await_type) {
        return Ok(());
    }
    Err(Failure::Usage(format!(
        "unknown gate type \"{}\"; use one of {} (gate check resolves timer, gh:run, gh:pr and bead gates; `gate resolve` a human one)",
        printable(await_type),
        GATE_TYPES.join(", ")
    )))
}

/// `gate create`: the gate and the `blocks` edge from the blocked bead, in one transaction.
async fn create(cli: &Cli, client: &Client, args: &GateCreateArgs) -> CommandResult {
    check_gate_type(&args.await_type)?;
    let timeout = cli
        .gate_timeout()
        .map(|text| parse_go_duration(text).map_err(|why| Failure::Usage(format!("invalid --timeout: {why}"))))
        .transpose()?;
    if args.await_type == "timer" && timeout.is_none_or(|timeout| timeout.is_zero()) {
        return Err(Failure::Usage("a timer gate needs --timeout (e.g. --timeout 2h)".into()));
    }
    let blocked = beads_of(client.query(Query::from(Lookup { ids: vec![BeadId::from(args.blocks.as_str())] })).await?)
        .into_iter()
        .next()
        .ok_or_else(|| {
            Failure::Refused(format!("issue not found: {}; the gate must block a bead of this store", args.blocks))
        })?;
    let title = match &args.await_id {
        Some(await_id) => format!("Gate: {} {await_id}", args.await_type),
        None => format!("Gate: {}", args.await_type),
    };
    let mut description = format!("Ad-hoc gate blocking {}", blocked.id);
    if let Some(reason) = &args.reason {
        description.push_str(&format!("\n\nReason: {reason}"));
    }
    let mut metadata = std::collections::BTreeMap::from([(AWAIT_TYPE_KEY.to_string(), args.await_type.clone())]);
    if let Some(await_id) = &args.await_id {
        metadata.insert(AWAIT_ID_KEY.into(), await_id.clone());
        // Gas City's gate-sweep reads a GitHub gate's run or PR from `metadata.ref`.
        if args.await_type.starts_with("gh:") {
            metadata.insert(REF_KEY.into(), await_id.clone());
        }
    }
    if let Some(timeout) = timeout {
        metadata.insert(TIMEOUT_KEY.into(), format_go_duration(timeout));
    }
    let gate = CreateBead {
        title,
        description,
        bead_type: GATE_TYPE.into(),
        priority: Some(2),
        metadata,
        ..CreateBead::default()
    };
    let edge = Command::DepAdd(api::command::DepAdd {
        issue_id: blocked.id.clone(),
        depends_on_id: BeadId::from("$0"),
        dep_type: DepType::blocks(),
    });
    let txn = Txn { conditions: Vec::new(), fences: Vec::new(), writes: vec![Command::Create(gate), edge] };
    let answer = client.execute(Command::Txn(txn)).await?;
    let api::outcome::Outcome::Txn(mut outcomes) = answer else {
        return Err(crate::answers::unexpected(&answer));
    };
    let created = one_bead(outcomes.swap_remove(0), "gate")?;
    if cli.json {
        print_bead_object(&created, true);
    } else {
        println!("✓ Created gate {} (type: {})", printable(created.id.as_str()), printable(&args.await_type));
        println!("  Blocks: {} ({})", printable(blocked.id.as_str()), printable(&blocked.title));
        if let Some(reason) = &args.reason {
            println!("  Reason: {}", printable(reason));
        }
        if let Some(timeout) = timeout {
            println!("  Timeout: {}", format_go_duration(timeout));
        }
        println!("\nResolve with: strand gate resolve {}", printable(created.id.as_str()));
    }
    Ok(true)
}

/// How often `add-waiter` reads again when the gate changed between its read and its write.
const WAITER_ATTEMPTS: usize = 16;

/// `gate add-waiter`: appends to the waiters, conditional on the revision read, so two waiters
/// added at once are both kept.
async fn add_waiter(client: &Client, id: &str, waiter: &str) -> CommandResult {
    if waiter.is_empty() {
        return Err(Failure::Usage("the waiter is empty; write `gate add-waiter GATE WAITER`".into()));
    }
    for _ in 0..WAITER_ATTEMPTS {
        let bead = gate(client, id).await?;
        let mut waiters = GateFields::of(&bead).unwrap_or_default().waiters;
        if waiters.iter().any(|known| known == waiter) {
            println!("Waiter already registered on gate {}", printable(id));
            return Ok(true);
        }
        waiters.push(waiter.to_string());
        let entries = [(WAITERS_KEY.to_string(), Some(serde_json::to_string(&waiters).expect("strings serialize")))];
        let write = Command::SetMetadata(api::command::SetMetadata { id: bead.id.clone(), entries: entries.into() });
        match client.execute(Command::Txn(Txn::conditional(bead.id.clone(), bead.revision, write))).await {
            Ok(_) => {
                println!("✓ Added waiter to gate {}: {}", printable(id), printable(waiter));
                return Ok(true);
            }
            Err(error) => match Failure::from(error) {
                Failure::Precondition { .. } => continue,
                other => return Err(other),
            },
        }
    }
    Err(Failure::Refused(format!("gate {id} kept changing while the waiter was added; run the command again")))
}

/// What evaluating one gate found.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// The condition holds: close the gate.
    Resolved(String),
    /// The condition failed for good: someone must look.
    Escalated(String),
    /// Not yet.
    Pending(String),
    /// It could not be evaluated.
    Error(String),
}

/// Judges a timer gate at `now_ms`.
fn judge_timer(bead: &Bead, timeout: Option<Duration>, now_ms: i64) -> Verdict {
    let Some(timeout) = timeout.filter(|timeout| !timeout.is_zero()) else {
        return Verdict::Error("timer gate without timeout configured".into());
    };
    let expires = bead.created_at.0.saturating_add(i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX));
    let seconds = |ms: i64| Duration::from_secs(u64::try_from((ms + 500) / 1000).unwrap_or(0));
    if now_ms > expires {
        Verdict::Resolved(format!("timer expired {} ago", format_go_duration(seconds(now_ms - expires))))
    } else {
        Verdict::Pending(format!("expires in {}", format_go_duration(seconds(expires - now_ms))))
    }
}

/// How long one `gh` or `gt` call may take.
const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// What a run of an outside tool gave: its stdout, or why it failed and its stderr.
async fn run_tool(program: &str, args: &[&str]) -> Result<Vec<u8>, (String, String)> {
    let child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(TOOL_TIMEOUT, child).await {
        Err(_) => Err((format!("{program} did not answer within {}s", TOOL_TIMEOUT.as_secs()), String::new())),
        Ok(Err(error)) if error.kind() == std::io::ErrorKind::NotFound => {
            Err((format!("{program} CLI not installed"), String::new()))
        }
        Ok(Err(error)) => Err((format!("cannot run {program}: {error}"), String::new())),
        Ok(Ok(output)) if output.status.success() => Ok(output.stdout),
        Ok(Ok(output)) => {
            let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
            Err((format!("{program} {} failed: {stderr}", args.first().copied().unwrap_or_default()), stderr))
        }
    }
}

/// `gh run view --json status,conclusion,name`.
#[derive(Deserialize)]
struct RunStatus {
    #[serde(default)]
    status: String,
    #[serde(default)]
    conclusion: String,
    #[serde(default)]
    name: String,
}

/// `gh pr view --json state,title`.
#[derive(Deserialize)]
struct PullStatus {
    #[serde(default)]
    state: String,
    #[serde(default)]
    title: String,
}

/// `gh run list --json databaseId`.
#[derive(Deserialize)]
struct RunListed {
    #[serde(rename = "databaseId")]
    database_id: u64,
}

/// Judges a `gh run view` answer as bd does.
fn judge_run(run: &RunStatus) -> Verdict {
    let name = &run.name;
    match (run.status.as_str(), run.conclusion.as_str()) {
        ("completed", "success") => Verdict::Resolved(format!("workflow '{name}' succeeded")),
        ("completed", "skipped") => Verdict::Resolved(format!("workflow '{name}' was skipped")),
        ("completed", "failure") => Verdict::Escalated(format!("workflow '{name}' failed")),
        ("completed", "cancelled" | "canceled") => Verdict::Escalated(format!("workflow '{name}' was canceled")),
        ("completed", other) => Verdict::Escalated(format!("workflow '{name}' concluded with {other}")),
        (status @ ("in_progress" | "queued" | "pending" | "waiting"), _) => {
            Verdict::Pending(format!("workflow '{name}' is {status}"))
        }
        (status, _) => Verdict::Pending(format!("workflow '{name}' status: {status}")),
    }
}

/// Judges a `gh pr view` answer as bd does.
fn judge_pull(pull: &PullStatus) -> Verdict {
    let title = &pull.title;
    match pull.state.as_str() {
        "MERGED" => Verdict::Resolved(format!("PR '{title}' was merged")),
        "CLOSED" => Verdict::Escalated(format!("PR '{title}' was closed without merging")),
        "OPEN" => Verdict::Pending(format!("PR '{title}' is still open")),
        state => Verdict::Pending(format!("PR '{title}' state: {state}")),
    }
}

/// Judges a `gh:run` gate. A workflow name (not a run number) is looked up as its newest run,
/// whose number is then kept in the gate's `await_id` (and `ref`, which gate-sweep reads) unless
/// `dry_run`; `bead` then carries the revision of that write, so a close conditional on it holds.
async fn judge_gh_run(client: &Client, bead: &mut Bead, await_id: &str, dry_run: bool) -> Verdict {
    if await_id.is_empty() {
        return Verdict::Pending("no run ID specified - set await_id or use workflow name hint".into());
    }
    let mut run_id = await_id.to_string();
    if !await_id.chars().all(|c| c.is_ascii_digit()) {
        let listed = run_tool(
            "gh",
            &[
                "run",
                "list",
                "--workflow",
                await_id,
                "--json",
                "databaseId,name,status,conclusion,createdAt,workflowName",
                "--limit",
                "5",
            ],
        )
        .await;
        let runs = match listed.map(|stdout| serde_json::from_slice::<Vec<RunListed>>(&stdout)) {
            Ok(Ok(runs)) => runs,
            Ok(Err(error)) => {
                return Verdict::Pending(format!("workflow hint '{await_id}': cannot read gh's answer: {error}"));
            }
            Err((why, _)) => return Verdict::Pending(format!("workflow hint '{await_id}': {why}")),
        };
        let Some(newest) = runs.first() else {
            return Verdict::Pending(format!("workflow hint '{await_id}': no runs found for workflow '{await_id}'"));
        };
        run_id = newest.database_id.to_string();
        if !dry_run {
            let entries =
                [(AWAIT_ID_KEY.to_string(), Some(run_id.clone())), (REF_KEY.to_string(), Some(run_id.clone()))];
            let write =
                Command::SetMetadata(api::command::SetMetadata { id: bead.id.clone(), entries: entries.into() });
            let conditional = Txn::conditional(bead.id.clone(), bead.revision, write);
            let written = match client.execute(Command::Txn(conditional)).await {
                Ok(api::outcome::Outcome::Txn(mut outcomes)) if outcomes.len() == 1 => {
                    one_bead(outcomes.remove(0), "gate")
                }
                Ok(other) => Err(crate::answers::unexpected(&other)),
                Err(error) => Err(Failure::from(error)),
            };
            match written {
                Ok(updated) => bead.revision = updated.revision,
                Err(failure) => {
                    let why = failure.message();
                    return Verdict::Error(format!("failed to update gate with discovered run ID: {why}"));
                }
            }
        }
    }
    match run_tool("gh", &["run", "view", &run_id, "--json", "status,conclusion,name"]).await {
        Ok(stdout) => match serde_json::from_slice::<RunStatus>(&stdout) {
            Ok(run) => judge_run(&run),
            Err(error) => Verdict::Error(format!("failed to parse gh output: {error}")),
        },
        Err((_, stderr)) if stderr.contains("not found") => Verdict::Escalated("workflow run not found".into()),
        Err((why, _)) => Verdict::Error(why),
    }
}

/// Judges a `gh:pr` gate.
async fn judge_gh_pr(await_id: &str) -> Verdict {
    if await_id.is_empty() {
        return Verdict::Pending("no PR number specified".into());
    }
    match run_tool("gh", &["pr", "view", await_id, "--json", "state,title"]).await {
        Ok(stdout) => match serde_json::from_slice::<PullStatus>(&stdout) {
            Ok(pull) => judge_pull(&pull),
            Err(error) => Verdict::Error(format!("failed to parse gh output: {error}")),
        },
        Err((_, stderr)) if stderr.contains("not found") || stderr.contains("Could not resolve") => {
            Verdict::Escalated("pull request not found".into())
        }
        Err((why, _)) => Verdict::Error(why),
    }
}

/// Judges a `bead` gate: a bead id of this store (bare, or after this namespace's name and a
/// colon), resolved when that bead is closed. bd cannot check any bead gate; one that names
/// another rig stays pending here too, since ids are only unique within a store.
async fn judge_bead(client: &Client, namespace: &str, await_id: &str) -> Verdict {
    let target = match await_id.split_once(':') {
        None => await_id,
        Some((rig, id)) if rig == namespace => id,
        Some((rig, _)) => {
            return Verdict::Pending(format!(
                "bead gate {await_id:?} names rig {rig:?}, which this store cannot check"
            ));
        }
    };
    if target.is_empty() {
        return Verdict::Pending("no bead specified - set await_id to a bead id of this store".into());
    }
    match client.query(Query::from(Lookup { ids: vec![BeadId::from(target)] })).await {
        Err(error) => Verdict::Error(error.to_string()),
        Ok(answer) => match beads_of(answer).first() {
            Some(bead) if bead.status == Status::Closed => Verdict::Resolved(format!("bead {target} closed")),
            Some(bead) => Verdict::Pending(format!("bead {target} is {}", bead.status)),
            None => Verdict::Pending(format!("bead gate {await_id:?} names a bead this store does not hold")),
        },
    }
}

/// `gate check`.
async fn check(cli: &Cli, client: &Client, args: &GateCheckArgs) -> CommandResult {
    let mut open = gates(client, not_closed(), false).await?;
    if args.limit > 0 {
        open.truncate(args.limit as usize);
    }
    let filter = args.await_type.as_deref();
    let candidates: Vec<(Bead, GateFields)> = open
        .into_iter()
        .filter_map(|bead| GateFields::of(&bead).map(|fields| (bead, fields)))
        .filter(|(_, fields)| type_matches(&fields.await_type, filter))
        .collect();
    if candidates.is_empty() && !cli.json {
        match filter {
            Some(filter) => println!("No open gates of type '{}' found.", printable(filter)),
            None => println!("No open gates found."),
        }
        return Ok(true);
    }
    let (mut checked, mut resolved, mut escalated, mut errors) = (0usize, 0usize, 0usize, 0usize);
    // A line quotes gate ids, await ids and the tools' answers: escaped here, for every line.
    let report = |line: String| {
        if cli.json {
            eprintln!("{}", printable(&line));
        } else {
            println!("{}", printable(&line));
        }
    };
    let namespace = cli.namespace();
    for (mut bead, fields) in candidates {
        let id = bead.id.clone();
        let verdict = match fields.await_type.as_str() {
            "timer" => judge_timer(&bead, fields.timeout, now_ms()),
            "bead" => judge_bead(client, &namespace, &fields.await_id).await,
            kind if kind.starts_with("gh:run") => judge_gh_run(client, &mut bead, &fields.await_id, args.dry_run).await,
            kind if kind.starts_with("gh:pr") => judge_gh_pr(&fields.await_id).await,
            // Human gates, and types no check knows, wait for `gate resolve`.
            _ => continue,
        };
        checked += 1;
        match verdict {
            Verdict::Error(why) => {
                errors += 1;
                eprintln!("{}", printable(&format!("✗ {id}: error checking - {why}")));
            }
            Verdict::Resolved(why) if args.dry_run => {
                resolved += 1;
                report(format!("✓ {id}: would resolve - {why}"));
            }
            Verdict::Resolved(why) => {
                // Closed only if nobody changed the gate since it was judged.
                let close = Command::Close(api::command::Close { ids: vec![id.clone()], reason: Some(why.clone()) });
                match client.execute(Command::Txn(Txn::conditional(id.clone(), bead.revision, close))).await {
                    Ok(_) => {
                        resolved += 1;
                        report(format!("✓ {id}: resolved - {why}"));
                    }
                    Err(error) => {
                        errors += 1;
                        eprintln!("{}", printable(&format!("✗ {id}: error closing - {error}")));
                    }
                }
            }
            Verdict::Escalated(why) => {
                escalated += 1;
                if args.dry_run {
                    report(format!("⚠ {id}: would escalate - {why}"));
                } else {
                    report(format!("⚠ {id}: ESCALATE - {why}"));
                    if args.escalate {
                        escalate(&bead, &fields, &why).await;
                    }
                }
            }
            Verdict::Pending(why) => report(format!("○ {id}: pending - {why}")),
        }
    }
    if cli.json {
        print_value(&serde_json::json!({
            "checked": checked, "resolved": resolved, "escalated": escalated, "errors": errors, "dry_run": args.dry_run,
        }));
    } else {
        println!("\nChecked {checked} gates: {resolved} resolved, {escalated} escalated, {errors} errors");
    }
    Ok(true)
}

/// Escalates a failed gate with `gt escalate`, as bd does; a failure is a warning.
async fn escalate(bead: &Bead, fields: &GateFields, why: &str) {
    let topic = format!("Gate escalation: {}", bead.id);
    let message = format!(
        "Gate {} needs attention.\nType: {}\nReason: {why}\nCreated: {}",
        bead.id,
        fields.await_type,
        bead.created_at.to_rfc3339()
    );
    if let Err((why, _)) = run_tool("gt", &["escalate", &topic, "-s", "HIGH", "-m", &message]).await {
        eprintln!("Warning: escalation failed for {}: {}", printable(bead.id.as_str()), printable(&why));
    }
}

/// One text line of a gate: `○ id - await_type await_id (timeout: T)`, and the step it blocks.
fn print_gates(gates: &[Bead]) {
    if gates.is_empty() {
        println!("No gates found.");
        return;
    }
    for bead in gates {
        let fields = GateFields::of(bead).unwrap_or_default();
        let symbol = if bead.status == Status::Closed { "●" } else { "○" };
        let awaited = [fields.await_type.as_str(), fields.await_id.as_str()].join(" ");
        let timeout = fields.timeout.map(|timeout| format!(" (timeout: {})", format_go_duration(timeout)));
        let timeout = timeout.unwrap_or_default();
        println!("{symbol} {} - {}{timeout}", printable(bead.id.as_str()), printable(awaited.trim()));
        if let Some((step, suffix)) = bead.id.0.split_once(".gate-") {
            println!("  Blocks: {}.{}", printable(step), printable(suffix));
        }
    }
    println!("To resolve a gate: strand gate resolve <gate-id>");
}

/// A gate's details as text.
fn print_gate_details(bead: &Bead) {
    let fields = GateFields::of(bead).unwrap_or_default();
    let symbol = if bead.status == Status::Closed { "●" } else { "○" };
    println!("{symbol} {} - {}", printable(bead.id.as_str()), printable(&bead.title));
    println!("  Status: {}", bead.status);
    println!("  Await Type: {}", printable(&fields.await_type));
    if !fields.await_id.is_empty() {
        println!("  Await ID: {}", printable(&fields.await_id));
    }
    if let Some(timeout) = fields.timeout {
        println!("  Timeout: {}", format_go_duration(timeout));
    }
    if !fields.waiters.is_empty() {
        println!("  Waiters:");
        fields.waiters.iter().for_each(|waiter| println!("    - {}", printable(waiter)));
    }
    if !bead.description.is_empty() {
        println!("  Description: {}", printable_block(&bead.description, BLOCK_INDENT));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_filters_follow_bd() {
        assert!(type_matches("gh:run", Some("gh")));
        assert!(type_matches("gh:pr", Some("gh")));
        assert!(!type_matches("timer", Some("gh")));
        assert!(type_matches("timer", Some("all")));
        assert!(type_matches("human", None));
        assert!(!type_matches("human", Some("timer")));
    }

    #[test]
    fn only_the_gate_types_a_check_or_a_person_resolves_are_made() {
        for known in GATE_TYPES {
            assert!(check_gate_type(known).is_ok(), "{known}");
        }
        for unknown in ["bogus", "", "gh", "gh:runs", "Timer", "condition"] {
            match check_gate_type(unknown) {
                Err(Failure::Usage(message)) => {
                    assert!(message.starts_with(&format!("unknown gate type \"{unknown}\"; use one of")), "{message}");
                    assert!(message.contains("human, timer, gh:run, gh:pr, bead"), "{message}");
                }
                other => panic!("{unknown:?} is refused as a usage error, got {other:?}"),
            }
        }
    }

    #[test]
    fn verdicts_follow_bd() {
        let run = |status: &str, conclusion: &str| RunStatus {
            status: status.into(),
            conclusion: conclusion.into(),
            name: "ci".into(),
        };
        assert!(matches!(judge_run(&run("completed", "success")), Verdict::Resolved(_)));
        assert!(matches!(judge_run(&run("completed", "skipped")), Verdict::Resolved(_)));
        assert!(matches!(judge_run(&run("completed", "failure")), Verdict::Escalated(_)));
        assert!(matches!(judge_run(&run("completed", "timed_out")), Verdict::Escalated(_)));
        assert!(matches!(judge_run(&run("in_progress", "")), Verdict::Pending(_)));
        let pull = |state: &str| PullStatus { state: state.into(), title: "t".into() };
        assert!(matches!(judge_pull(&pull("MERGED")), Verdict::Resolved(_)));
        assert!(matches!(judge_pull(&pull("CLOSED")), Verdict::Escalated(_)));
        assert!(matches!(judge_pull(&pull("OPEN")), Verdict::Pending(_)));
    }

    #[test]
    fn timers_resolve_after_their_timeout() {
        let gate = CreateBead { title: "Gate: timer".into(), bead_type: GATE_TYPE.into(), ..CreateBead::default() };
        let mut bead = gate.into_bead(BeadId::from("st-1"));
        bead.created_at = api::model::Timestamp(1_000_000);
        let hour = Some(Duration::from_secs(3600));
        assert_eq!(judge_timer(&bead, hour, 1_000_000 + 1_800_000), Verdict::Pending("expires in 30m0s".into()));
        assert_eq!(judge_timer(&bead, hour, 1_000_000 + 3_605_000), Verdict::Resolved("timer expired 5s ago".into()));
        assert!(matches!(judge_timer(&bead, None, 0), Verdict::Error(_)));
    }
}
