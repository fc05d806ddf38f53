//! `strand top`: a live terminal view of the cluster and its work (as `nats top` is of NATS):
//! what needs attention first, then the members (role, addresses, term, indexes, lag,
//! reachability), the apply version, the controller and when each duty last ran, each
//! namespace's beads by status, and its queues (ready work, the oldest ready bead's wait, leases
//! held and lapsing within a minute, dead-lettered beads, ready work by pool), the figures the
//! web console shows, with what in them needs attention judged as the console judges it. It refreshes every `--interval` and quits on `q`
//! (or Esc, or Ctrl-C); when stdout is not a terminal it prints one plain snapshot, and with
//! `--json` one JSON snapshot.
//!
//! Invariant: a view holds only what the last refresh read; a failed read shows as unavailable,
//! never as the figures of an earlier one.

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::time::Duration;

use api::command::Query;
use api::commands::RegisteredAnswer;
use api::commands::namespace_queues::{NamespaceQueues, QueueDetail};
use api::commands::namespace_show::NamespaceShow;
use api::commands::order_list::OrderList;
use api::outcome::Outcome;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyModifiers};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Text};
use ratatui::widgets::{Block, Paragraph};
use serde_json::json;

use crate::Cli;
use crate::failure::{CommandResult, Failure};

/// Most namespaces a view shows.
pub const NAMESPACES_SHOWN_MAX: usize = 20;

/// `strand top`'s flags.
#[derive(clap::Args, Debug)]
pub struct TopArgs {
    /// Time between refreshes, e.g. 1s or 500ms.
    #[arg(long, default_value = "1s", value_parser = parse_interval)]
    interval: Duration,
}

fn parse_interval(text: &str) -> Result<Duration, String> {
    let interval = humantime::parse_duration(text).map_err(|error| format!("{error}; write it as 1s or 500ms"))?;
    if interval < Duration::from_millis(100) {
        return Err("refreshing more often than every 100ms would load the cluster; give 100ms or more".into());
    }
    Ok(interval)
}

/// How a line reads: plain, a heading, or something that needs attention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tone {
    Plain,
    Heading,
    Alarm,
}

/// A namespace's name, its counts as `namespace show` reads them, its queues as `namespace queues`
/// reads them, and what in them needs attention.
struct NamespaceView {
    name: String,
    counts: Vec<(String, u64)>,
    queues: QueueDetail,
    attention: Vec<String>,
}

/// One refresh: what the cluster said, or why it could not be read.
struct Snapshot {
    status: Result<api::proto::StatusResponse, String>,
    namespaces: Result<Vec<NamespaceView>, String>,
}

/// The clients a view reads with, made once and kept across refreshes (their connections too):
/// one for the cluster, one per namespace shown.
#[derive(Default)]
struct Readers {
    cluster: Option<api::client::Client>,
    namespaces: BTreeMap<String, api::client::Client>,
}

async fn read(cli: &Cli, readers: &mut Readers) -> Snapshot {
    if readers.cluster.is_none() {
        match cli.client() {
            Ok(client) => readers.cluster = Some(client),
            Err(failure) => {
                let why = failure.message().to_string();
                return Snapshot { status: Err(why.clone()), namespaces: Err(why) };
            }
        }
    }
    let client = readers.cluster.as_ref().expect("made above");
    let status = client.status(false).await.map_err(|error| error.to_string());
    let namespaces = async {
        let names = match client.query(Query::Namespaces).await.map_err(|error| error.to_string())? {
            Outcome::Namespaces(namespaces) => namespaces,
            other => return Err(format!("the cluster answered the namespaces with {other:?}")),
        };
        let mut shown = Vec::new();
        for info in names.into_iter().take(NAMESPACES_SHOWN_MAX) {
            if !readers.namespaces.contains_key(&info.name) {
                let client = cli.client_of_existing(&info.name).map_err(|failure| failure.message().to_string())?;
                readers.namespaces.insert(info.name.clone(), client);
            }
            let client = &readers.namespaces[&info.name];
            let failed = |error: api::client::ClientError| format!("namespace {}: {error}", info.name);
            let counts = match client.query(NamespaceShow::default().into()).await.map_err(failed)? {
                Outcome::Registered(RegisteredAnswer::NamespaceDetail(detail)) => detail.counts,
                other => return Err(format!("namespace {} answered {other:?}", info.name)),
            };
            let queues = match client.query(NamespaceQueues::default().into()).await.map_err(failed)? {
                Outcome::Registered(RegisteredAnswer::QueueDetail(queues)) => queues,
                other => return Err(format!("namespace {} answered {other:?}", info.name)),
            };
            let has_orders = counts.iter().any(|(name, count)| name == "orders" && *count > 0);
            let orders = if has_orders {
                match client.query(OrderList { now: api::model::Timestamp(0) }.into()).await.map_err(failed)? {
                    Outcome::Orders(orders) => orders,
                    other => return Err(format!("namespace {} answered {other:?}", info.name)),
                }
            } else {
                Vec::new()
            };
            let attention = api::status::queue_attention(&info.name, &queues, &orders);
            shown.push(NamespaceView { name: info.name, counts, queues, attention });
        }
        // Only the namespaces shown keep a client, so a long view holds no more than it shows.
        readers.namespaces.retain(|name, _| shown.iter().any(|seen| &seen.name == name));
        Ok(shown)
    }
    .await;
    Snapshot { status, namespaces }
}

/// The view of a snapshot, line by line.
fn lines(snapshot: &Snapshot) -> Vec<(Tone, String)> {
    let mut lines = Vec::new();
    let status = match &snapshot.status {
        Ok(status) => status,
        Err(error) => {
            lines.push((Tone::Alarm, format!("CLUSTER UNAVAILABLE: {error}")));
            lines.push((
                Tone::Plain,
                "no figures are shown until a node answers; check --endpoints and that the nodes run".into(),
            ));
            return lines;
        }
    };
    // What needs attention, and nothing when all is well.
    let mut attention = api::status::attention(status);
    if let Ok(namespaces) = &snapshot.namespaces {
        attention.extend(namespaces.iter().flat_map(|namespace| namespace.attention.iter().cloned()));
    }
    if attention.is_empty() {
        lines.push((Tone::Plain, "all is well: every member answers and keeps up".into()));
    } else {
        lines.push((Tone::Heading, "NEEDS ATTENTION".into()));
        lines.extend(attention.into_iter().map(|what| (Tone::Alarm, format!("  {what}"))));
    }
    lines.push((Tone::Plain, String::new()));
    let leader = if status.leader_id == 0 { "none".to_string() } else { status.leader_id.to_string() };
    let version = api::status::apply_version(status).map_or("?".to_string(), |(version, _)| version.to_string());
    lines.push((
        Tone::Heading,
        format!("CLUSTER  leader {leader}, term {}, voters {:?}, apply version {version}", status.term, status.voters),
    ));
    lines.push((
        Tone::Plain,
        format!(
            "{:>4}  {:<22} {:<12} {:>6} {:>10} {:>10} {:>8}  {}",
            "id", "client", "state", "term", "last_log", "applied", "lag", "leases"
        ),
    ));
    for node in &status.nodes {
        let tone = if node.state == "unreachable" || !node.fatal_error.is_empty() { Tone::Alarm } else { Tone::Plain };
        lines.push((
            tone,
            format!(
                "{:>4}  {:<22} {:<12} {:>6} {:>10} {:>10} {:>8}  {}",
                node.id,
                if node.client_address.is_empty() { "?" } else { &node.client_address },
                node.state,
                node.term,
                node.last_log_index,
                node.applied_index,
                node.lag,
                node.lease_count
            ),
        ));
    }
    match api::status::controller(status) {
        Some(id) => {
            let now = crate::values::now_ms();
            let duties =
                status.nodes.iter().find(|node| node.id == id).map(|node| node.duties.clone()).unwrap_or_default();
            let ran: Vec<String> = duties
                .iter()
                .map(|duty| match duty.last_run_ms {
                    Some(ms) => format!("{} {:.1}s ago", duty.name, now.saturating_sub(ms).max(0) as f64 / 1000.0),
                    None if duty.interval_ms == 0 => format!("{} off", duty.name),
                    None => format!("{} not yet", duty.name),
                })
                .collect();
            lines.push((Tone::Plain, format!("controller on node {id}: {}", ran.join(", "))));
        }
        None => {
            lines.push((Tone::Alarm, "controller: none running (no leader, or its controller has not begun)".into()))
        }
    }
    lines.push((Tone::Plain, String::new()));
    match &snapshot.namespaces {
        Err(error) => lines.push((Tone::Alarm, format!("NAMESPACES UNAVAILABLE: {error}"))),
        Ok(namespaces) if namespaces.is_empty() => {
            lines.push((Tone::Heading, "NAMESPACES  none yet (the first write creates one)".into()))
        }
        Ok(namespaces) => {
            lines.push((Tone::Heading, "NAMESPACES".into()));
            let columns: Vec<&str> = namespaces[0].counts.iter().map(|(name, _)| name.as_str()).collect();
            let header: Vec<String> = columns.iter().map(|name| format!(" {name:>11}")).collect();
            lines.push((Tone::Plain, format!("{:<20} {}", "namespace", header.join(""))));
            for namespace in namespaces {
                let cells: Vec<String> = namespace.counts.iter().map(|(_, count)| format!(" {count:>11}")).collect();
                let name = api::printable::printable(&namespace.name);
                lines.push((Tone::Plain, format!("{name:<20} {}", cells.join(""))));
            }
            lines.push((Tone::Plain, String::new()));
            lines.push((Tone::Heading, "QUEUES".into()));
            lines.push((
                Tone::Plain,
                format!(
                    "{:<20} {:>7} {:>9} {:>7} {:>8} {:>6}  {}",
                    "namespace", "ready", "oldest", "leased", "lapsing", "dead", "ready by pool"
                ),
            ));
            for namespace in namespaces {
                let queues = &namespace.queues;
                let oldest = queues.oldest_ready.as_ref().map_or("-".to_string(), |(_, created_at)| {
                    crate::values::span((queues.now.0 - created_at.0).max(0))
                });
                let pools: Vec<String> = queues
                    .ready_by_pool
                    .iter()
                    .map(|(pool, count)| {
                        let pool = if pool.is_empty() {
                            "(none)".to_string()
                        } else {
                            api::printable::printable(pool).to_string()
                        };
                        format!("{pool} {count}")
                    })
                    .collect();
                let tone = if namespace.attention.is_empty() { Tone::Plain } else { Tone::Alarm };
                lines.push((
                    tone,
                    format!(
                        "{:<20} {:>7} {:>9} {:>7} {:>8} {:>6}  {}",
                        api::printable::printable(&namespace.name).to_string(),
                        queues.ready,
                        oldest,
                        queues.leased,
                        queues.expiring,
                        queues.dead_lettered,
                        pools.join(", ")
                    ),
                ));
            }
        }
    }
    lines
}

fn snapshot_json(snapshot: &Snapshot) -> serde_json::Value {
    let status = match &snapshot.status {
        Ok(status) => json!({
            "leader_id": status.leader_id, "term": status.term, "voters": status.voters,
            "apply_version": api::status::apply_version(status).map(|(version, _)| version),
            "controller": api::status::controller(status),
            "nodes": status.nodes.iter().map(|node| json!({
                "id": node.id, "client_address": node.client_address, "state": node.state, "term": node.term,
                "last_log_index": node.last_log_index, "applied_index": node.applied_index, "lag": node.lag,
                "lease_count": node.lease_count, "error": node.error, "fatal_error": node.fatal_error,
                "note": node.note, "divergence": node.divergence,
            })).collect::<Vec<_>>(),
        }),
        Err(error) => json!({ "unavailable": error }),
    };
    let namespaces = match &snapshot.namespaces {
        Ok(namespaces) => json!(namespaces
            .iter()
            .map(|namespace| json!({
                "name": namespace.name,
                "counts": namespace.counts.iter().map(|(name, count)| (name.clone(), json!(count))).collect::<serde_json::Map<_, _>>(),
                "queues": namespace.queues.to_json(),
                "attention": namespace.attention,
            }))
            .collect::<Vec<_>>()),
        Err(error) => json!({ "unavailable": error }),
    };
    json!({ "cluster": status, "namespaces": namespaces })
}

/// Runs `strand top`.
pub async fn run(cli: &Cli, args: &TopArgs) -> CommandResult {
    if cli.json || !std::io::stdout().is_terminal() {
        let snapshot = read(cli, &mut Readers::default()).await;
        if cli.json {
            crate::output::print_value(&snapshot_json(&snapshot));
        } else {
            for (_, line) in lines(&snapshot) {
                println!("{line}");
            }
        }
        return match &snapshot.status {
            Ok(_) => Ok(true),
            Err(error) => Err(Failure::Unavailable(error.clone())),
        };
    }
    let mut terminal =
        ratatui::try_init().map_err(|error| Failure::Refused(format!("cannot take over the terminal: {error}")))?;
    let result = live(cli, args, &mut terminal).await;
    ratatui::restore();
    result
}

async fn live(cli: &Cli, args: &TopArgs, terminal: &mut ratatui::DefaultTerminal) -> CommandResult {
    let mut readers = Readers::default();
    loop {
        let snapshot = read(cli, &mut readers).await;
        let shown: Vec<Line> = lines(&snapshot)
            .into_iter()
            .map(|(tone, line)| match tone {
                Tone::Plain => Line::raw(line),
                Tone::Heading => Line::styled(line, Style::default().add_modifier(Modifier::BOLD)),
                Tone::Alarm => Line::styled(line, Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)),
            })
            .collect();
        let title = format!(" strand top: every {}, q to quit ", humantime::format_duration(args.interval));
        terminal
            .draw(|frame| {
                frame.render_widget(
                    Paragraph::new(Text::from(shown)).block(Block::bordered().title(title)),
                    frame.area(),
                )
            })
            .map_err(|error| Failure::Refused(format!("cannot draw on the terminal: {error}")))?;
        let next = tokio::time::Instant::now() + args.interval;
        while tokio::time::Instant::now() < next {
            while event::poll(Duration::ZERO)
                .map_err(|error| Failure::Refused(format!("cannot read the keyboard: {error}")))?
            {
                if let Event::Key(key) =
                    event::read().map_err(|error| Failure::Refused(format!("cannot read the keyboard: {error}")))?
                    && (matches!(key.code, KeyCode::Char('q') | KeyCode::Esc)
                        || (key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL)))
                {
                    return Ok(true);
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
