//! The orchestration commands of docs/beads.md §7 that are one request each: `namespace`, `sling`,
//! `hook` and `purge`. Formulas and molecules, orders, mail, convoys, leases and events have their
//! own modules in `work/`; the answer helpers they share (taking beads out of an answer, naming an
//! answer of the wrong kind) are in `crate::answers`.
//!
//! Every read has `--json`. A command that finds nothing to do exits 1 (`hook` with no work),
//! except `hook --inject`, which always exits 0 so that a session hook never blocks its agent.

use std::time::Duration;

use api::command::{Command, Query, Sling};
use api::commands::RegisteredAnswer;
use api::commands::hook::Hook;
use api::commands::namespace_queues::{NamespaceQueues, QueueDetail};
use api::commands::namespace_show::{NamespaceDetail, NamespaceShow};
use api::commands::purge_preview::PurgePreview;
use api::limits::LIST_RESULTS_MAX;
use api::model::{Actor, Bead, Status, Timestamp};
use api::outcome::{NamespaceInfo, Outcome};
use api::printable::printable;
use clap::{Args, Subcommand, ValueEnum};

use crate::answers::{beads_of, unexpected};
use crate::output::{bead_line, print_beads, print_value};
use crate::values::span;
use crate::work::molecule::{formula_source, vars};
use crate::{Cli, CommandResult, Failure};

/// How many beads `hook` shows by default (`--inject` shows one: the next item).
const HOOK_LIMIT_DEFAULT: u32 = 20;
/// How many beads `hook --inject` shows by default.
const HOOK_INJECT_LIMIT_DEFAULT: u32 = 1;

#[derive(Subcommand, Debug)]
pub enum NamespaceCommand {
    /// List the cluster's namespaces: name, id prefix, bead count, newest event seq.
    List,
    /// Show namespace NAME's settings and counts: its prefix and lease settings, its beads by
    /// status, its ready and leased beads, formulas and orders (JSON: one object).
    Show {
        /// The namespace (not --namespace).
        name: String,
    },
    /// Show namespace NAME's work queues: ready work by pool and by assignee, the oldest ready
    /// bead, who holds what, leases about to lapse, dead-lettered beads (JSON: one object).
    Queues {
        /// The namespace (not --namespace).
        name: String,
        /// Leases that lapse within this long count as expiring, e.g. 1m or 30s.
        #[arg(long, default_value = "1m", value_parser = crate::values::parse_duration)]
        window: Duration,
    },
    /// Create namespace NAME (creating it again with the same prefix succeeds).
    Create {
        /// The namespace (not --namespace).
        name: String,
        /// Id prefix of its beads; default: NAME itself, when it is a valid prefix.
        #[arg(long)]
        prefix: Option<String>,
    },
    /// Print the namespace that holds a Gas City store: the exec store's for a store root and
    /// scope (`GC_STORE_ROOT`, `GC_STORE_SCOPE`), or with `--beads-dir` the one `strand` in bd's
    /// place uses for `BEADS_DIR`.
    OfStore {
        /// The store root (`GC_STORE_ROOT`), or with --beads-dir a `BEADS_DIR`.
        root: String,
        /// The exec store's scope: city or rig.
        #[arg(long, default_value = "city")]
        scope: String,
        /// ROOT is a `BEADS_DIR` (`<scope root>/.beads`), as Gas City gives `bd`.
        #[arg(long)]
        beads_dir: bool,
    },
    /// Delete namespace NAME; refused while it holds beads unless --force.
    Delete {
        /// The namespace (not --namespace).
        name: String,
        /// Delete its beads, events and formulas too.
        #[arg(long)]
        force: bool,
    },
    /// Set namespace NAME's lease settings (JSON: the namespace).
    Configure {
        /// The namespace (not --namespace).
        name: String,
        /// The lease a claim that names none gets (1s to 7d: 10m, 1h), or `none` for no lease.
        #[arg(long, value_name = "DURATION|none")]
        default_lease: Option<String>,
        /// How many times a bead's leases may expire before it is dead-lettered (1 to 1000).
        #[arg(long, value_name = "N")]
        max_deliveries: Option<u32>,
    },
}

/// How slung work merges, recorded as `gc.merge` metadata.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Merge {
    /// Straight to the main branch.
    Direct,
    /// Through a merge request.
    Mr,
    /// Kept local.
    Local,
}

impl Merge {
    fn as_str(self) -> &'static str {
        match self {
            Merge::Direct => "direct",
            Merge::Mr => "mr",
            Merge::Local => "local",
        }
    }
}

#[derive(Args, Debug)]
pub struct SlingArgs {
    /// An existing bead's id, or the title of a new task. A convoy or epic routes its open children.
    subject: String,
    /// The agent (with --pool, the pool).
    target: String,
    /// Route to a pool (label `pool:<TARGET>`, metadata `gc.routed_to`) instead of an agent.
    #[arg(long)]
    pool: bool,
    /// Cook this formula as a wisp first and route its root: a formula file, or a stored name.
    #[arg(long)]
    formula: Option<String>,
    /// A formula variable, key=value (repeatable).
    #[arg(long = "var", value_name = "KEY=VALUE")]
    vars: Vec<String>,
    /// Do not wrap a single bead in an auto-convoy.
    #[arg(long, conflicts_with = "owned")]
    no_convoy: bool,
    /// Label the auto-convoy `owned` (it does not close by itself).
    #[arg(long)]
    owned: bool,
    /// How the work merges.
    #[arg(long, value_enum)]
    merge: Option<Merge>,
}

#[derive(Args, Debug)]
pub struct HookArgs {
    /// The agent; default: the actor.
    #[arg(long)]
    agent: Option<String>,
    /// The agent's pool: also offer ready, unassigned beads routed to it.
    #[arg(long)]
    pool: Option<String>,
    /// Print the work as a <system-reminder> block for an agent's prompt (nothing when there is
    /// none) and always exit 0, even on an error (reported on stderr).
    #[arg(long)]
    inject: bool,
    /// Claim the next item atomically (the agent's in-progress bead comes back first).
    #[arg(long)]
    claim: bool,
    /// With --claim: a lease, so the claim lapses unless renewed (1s to 7d; 10m, 1h).
    #[arg(long, value_name = "DURATION", value_parser = crate::values::parse_lease, requires = "claim")]
    lease: Option<u64>,
    /// At most N beads; default 20, or 1 with --inject.
    #[arg(long)]
    limit: Option<u32>,
}

#[derive(Args, Debug)]
pub struct PurgeArgs {
    /// Only count what would be removed.
    #[arg(long)]
    dry_run: bool,
    /// bd's confirmation flag; Strand purges without it (`--dry-run` previews).
    #[arg(long, short)]
    force: bool,
    /// Only wisps closed at least this long ago (e.g. 7d, 12h).
    #[arg(long, value_name = "DURATION", value_parser = crate::values::parse_duration, default_value = "0s")]
    older_than: Duration,
}

/// Runs a `namespace` command.
pub async fn run_namespace(cli: &Cli, command: &NamespaceCommand) -> CommandResult {
    let (client, command) = match command {
        NamespaceCommand::List => {
            let answer = cli.client()?.query(Query::Namespaces).await?;
            let Outcome::Namespaces(namespaces) = answer else { return Err(unexpected(&answer)) };
            print_namespaces(&namespaces, cli.json);
            return Ok(true);
        }
        NamespaceCommand::Show { name } => {
            let answer = cli.client_of_existing(name)?.query(NamespaceShow::default().into()).await?;
            let Outcome::Registered(RegisteredAnswer::NamespaceDetail(detail)) = answer else {
                return Err(unexpected(&answer));
            };
            print_namespace_detail(&detail, cli.json);
            return Ok(true);
        }
        NamespaceCommand::Queues { name, window } => {
            let window_ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX).max(1);
            let read = NamespaceQueues { now: Timestamp(0), window_ms };
            let answer = cli.client_of_existing(name)?.query(read.into()).await?;
            let Outcome::Registered(RegisteredAnswer::QueueDetail(detail)) = answer else {
                return Err(unexpected(&answer));
            };
            if cli.json {
                print_value(&detail.to_json());
            } else {
                print_queues(name, &detail);
            }
            return Ok(true);
        }
        NamespaceCommand::Create { name, prefix } => {
            let prefix = match prefix {
                Some(prefix) => prefix.clone(),
                None => default_prefix(name)?,
            };
            (cli.client_in(name)?, Command::NamespaceCreate(api::command::NamespaceCreate { prefix }))
        }
        NamespaceCommand::Delete { name, force } => {
            (cli.client_of_existing(name)?, Command::NamespaceDelete(api::command::NamespaceDelete { force: *force }))
        }
        NamespaceCommand::Configure { name, default_lease, max_deliveries } => {
            let default_lease_ms = match default_lease.as_deref() {
                None => None,
                Some("none") => Some(None),
                Some(text) => Some(Some(
                    crate::values::parse_lease(text)
                        .map_err(|why| Failure::Usage(format!("--default-lease: {why}")))?,
                )),
            };
            if default_lease_ms.is_none() && max_deliveries.is_none() {
                return Err(Failure::Usage("namespace configure needs --default-lease or --max-deliveries".into()));
            }
            let command = Command::NamespaceConfigure(api::command::NamespaceConfigure {
                default_lease_ms,
                max_deliveries: *max_deliveries,
            });
            (cli.client_of_existing(name)?, command)
        }
        NamespaceCommand::OfStore { root, scope, beads_dir } => {
            let name = if *beads_dir {
                crate::compat::exec_store::namespace_of_beads_dir(root)
            } else {
                crate::compat::exec_store::namespace_of_store(root, scope)
            };
            if cli.json {
                print_value(&serde_json::json!({ "namespace": name }));
            } else {
                println!("{name}");
            }
            return Ok(true);
        }
    };
    let deleting = matches!(command, Command::NamespaceDelete(_));
    let answer = client.execute(command).await?;
    let Outcome::Namespaces(namespaces) = answer else { return Err(unexpected(&answer)) };
    if cli.json {
        print_value(&namespaces.first());
    } else {
        for namespace in &namespaces {
            let verb = if deleting { "deleted" } else { "namespace" };
            println!(
                "{verb} {} (id prefix {}, {}, {})",
                namespace.name,
                namespace.prefix,
                crate::output::counted(namespace.beads, "bead"),
                lease_settings(namespace)
            );
        }
    }
    Ok(true)
}

/// The prefix of a namespace created without `--prefix`: its own name, when that is a valid prefix.
fn default_prefix(name: &str) -> Result<String, Failure> {
    api::validate::validate_prefix(name).map_err(|refusal| {
        Failure::Usage(format!("namespace {name:?} cannot be its own id prefix ({refusal}); pass --prefix P"))
    })?;
    Ok(name.to_string())
}

fn print_namespaces(namespaces: &[NamespaceInfo], json: bool) {
    if json {
        print_value(&namespaces);
        return;
    }
    for namespace in namespaces {
        println!(
            "{}  prefix {}  {}  last event {}  {}",
            namespace.name,
            namespace.prefix,
            crate::output::counted(namespace.beads, "bead"),
            namespace.last_event_seq,
            lease_settings(namespace)
        );
    }
}

fn print_namespace_detail(detail: &NamespaceDetail, json: bool) {
    let info = &detail.info;
    if json {
        let counts: serde_json::Map<String, serde_json::Value> =
            detail.counts.iter().map(|(name, count)| (name.clone(), (*count).into())).collect();
        let mut object = serde_json::to_value(info).unwrap_or_default();
        object["counts"] = counts.into();
        print_value(&object);
        return;
    }
    let count = |name: &str| detail.counts.iter().find(|(counted, _)| counted == name).map_or(0, |(_, count)| *count);
    let by_status: Vec<String> =
        Status::ALL.into_iter().map(|status| format!("{} {}", status.as_str(), count(status.as_str()))).collect();
    println!("{}  prefix {}", printable(&info.name), printable(&info.prefix));
    println!("  {}: {}", crate::output::counted(info.beads, "bead"), by_status.join(", "));
    println!("  ready {}, leased {}", count("ready"), count("leased"));
    println!(
        "  {}, {}, last event {}",
        crate::output::counted(count("formulas"), "formula"),
        crate::output::counted(count("orders"), "order"),
        info.last_event_seq
    );
    println!("  {}", lease_settings(info));
}

/// Counts as `name count, ...`, an empty name shown as `empty`.
fn count_list(counts: &[(String, u64)], empty: &str) -> String {
    if counts.is_empty() {
        return "none".into();
    }
    let named = |name: &str| if name.is_empty() { empty.to_string() } else { printable(name).to_string() };
    counts.iter().map(|(name, count)| format!("{} {count}", named(name))).collect::<Vec<_>>().join(", ")
}

fn print_queues(name: &str, detail: &QueueDetail) {
    let oldest = match &detail.oldest_ready {
        Some((id, created_at)) => format!(" (oldest {id} waiting {})", span(detail.now.0 - created_at.0)),
        None => String::new(),
    };
    println!("{}  ready {}{oldest}", printable(name), detail.ready);
    println!("  ready by pool: {}", count_list(&detail.ready_by_pool, "(no pool)"));
    println!("  ready by assignee: {}", count_list(&detail.ready_by_assignee, "(unassigned)"));
    println!("  in progress by assignee: {}", count_list(&detail.in_progress_by_assignee, "(nobody)"));
    println!(
        "  leased {}, {} lapsing within {}",
        detail.leased,
        detail.expiring,
        span(i64::try_from(detail.window_ms).unwrap_or(i64::MAX))
    );
    for lease in detail.leases.iter().take_while(|lease| lease.expires_at.0 - detail.now.0 <= detail.window_ms as i64) {
        let left = lease.expires_at.0 - detail.now.0;
        let when = if left < 0 { format!("lapsed {} ago", span(-left)) } else { format!("lapses in {}", span(left)) };
        println!("    {} held by {} (lease {}), {when}", lease.bead_id, printable(&lease.holder), lease.lease_id);
    }
    println!("  dead-lettered {}", detail.dead_lettered);
    for id in &detail.dead_letter_ids {
        println!("    {id}");
    }
}

/// A namespace's lease settings, as text.
fn lease_settings(namespace: &NamespaceInfo) -> String {
    let lease = match namespace.default_lease_ms {
        Some(lease_ms) => format!("default lease {}", humantime::format_duration(Duration::from_millis(lease_ms))),
        None => "no default lease".to_string(),
    };
    format!("{lease}, dead-letter after {} deliveries", namespace.max_deliveries)
}

/// Runs `sling`.
pub async fn run_sling(cli: &Cli, args: &SlingArgs) -> CommandResult {
    let sling = Sling {
        subject: args.subject.clone(),
        target: args.target.clone(),
        pool: args.pool,
        formula: args.formula.as_deref().map(formula_source).transpose()?,
        vars: vars(&args.vars)?,
        no_convoy: args.no_convoy,
        owned: args.owned,
        merge: args.merge.map(|merge| merge.as_str().to_string()),
    };
    if sling.formula.is_none() && !sling.vars.is_empty() {
        return Err(Failure::Usage("--var is only used with --formula; add --formula F or drop --var".into()));
    }
    let beads = beads_of(cli.client()?.execute(Command::Sling(sling)).await?);
    if cli.json {
        print_beads(&beads, true);
        return Ok(true);
    }
    let kind = if args.pool { "pool" } else { "agent" };
    println!("slung to {kind} {}:", printable(&args.target));
    for bead in &beads {
        println!("  {}", bead_line(bead));
    }
    Ok(true)
}

/// The `<system-reminder>` block of docs/beads.md §7 for these beads (never empty); each bead's line
/// is escaped (`bead_line`), so a title cannot add lines to the block.
pub fn inject_block(beads: &[Bead]) -> String {
    assert!(!beads.is_empty(), "an inject block is only printed when there is work");
    let lines: Vec<String> = beads.iter().map(bead_line).collect();
    format!(
        "<system-reminder>\nYou have pending work. Pick up the next item:\n\n<work-items>\n{}\n</work-items>\n\nClaim it and start working. Run 'strand hook' to see the full queue.\n</system-reminder>",
        lines.join("\n")
    )
}

/// Runs `hook`: the agent's work. Exit 0 when there is work, 1 when there is none; with
/// `--inject`, always 0.
pub async fn run_hook(cli: &Cli, args: &HookArgs) -> CommandResult {
    let found = hook_beads(cli, args).await;
    if !args.inject {
        let beads = found?;
        if cli.json {
            print_beads(&beads, true);
        } else if beads.is_empty() {
            println!("no work for {}", printable(&args.agent.clone().unwrap_or_else(|| cli.actor())));
        } else {
            print_beads(&beads, false);
        }
        return Ok(!beads.is_empty());
    }
    match found {
        Ok(beads) if beads.is_empty() => {}
        Ok(beads) => println!("{}", inject_block(&beads)),
        // An injected hook must not break the agent's session: say why, exit 0.
        Err(failure) => eprintln!("error: {}", printable(failure.message())),
    }
    Ok(true)
}

async fn hook_beads(cli: &Cli, args: &HookArgs) -> Result<Vec<Bead>, Failure> {
    let agent = args.agent.clone().unwrap_or_else(|| cli.actor());
    let default_limit = if args.inject { HOOK_INJECT_LIMIT_DEFAULT } else { HOOK_LIMIT_DEFAULT };
    let limit = args.limit.unwrap_or(default_limit);
    if limit as usize > LIST_RESULTS_MAX {
        return Err(Failure::Usage(format!("--limit {limit} is over {LIST_RESULTS_MAX}; ask for fewer")));
    }
    let client = cli.client()?;
    let answer = if args.claim {
        client
            .execute(Command::HookClaim(api::command::HookClaim {
                agent: Actor(agent),
                pool: args.pool.clone(),
                lease_ms: args.lease,
            }))
            .await?
    } else {
        // The node reads `now` from its own clock (for `defer_until`); the reader's is never used.
        let query = Query::from(Hook { agent, pool: args.pool.clone(), limit, now: Timestamp(0) });
        client.query(query).await?
    };
    Ok(beads_of(answer))
}

/// Runs `purge`: prints `{"purged_count": N}` (bd's shape) or `purged N closed wisps`.
pub async fn run_purge(cli: &Cli, args: &PurgeArgs) -> CommandResult {
    let older_than_ms = i64::try_from(args.older_than.as_millis()).unwrap_or(i64::MAX);
    let client = cli.client()?;
    let answer = if args.dry_run {
        // The node stamps `now` with its own clock.
        client.query(Query::from(PurgePreview { older_than_ms, now: Timestamp(0) })).await?
    } else {
        client.execute(Command::Purge(api::command::Purge { older_than_ms })).await?
    };
    let Outcome::Purged { purged_count } = answer else { return Err(unexpected(&answer)) };
    if cli.json {
        print_value(&serde_json::json!({ "purged_count": purged_count }));
    } else if args.dry_run {
        println!("would purge {purged_count} closed wisps");
    } else {
        println!("purged {purged_count} closed wisps");
    }
    Ok(true)
}
