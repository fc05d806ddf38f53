//! `strand order put|list|show|delete|history|run`: orders, the automations the leader's
//! controller fires (see `api::order` for the TOML and the triggers). `put` names an order after
//! its file (`orders/digest.toml` is `digest`), as Gas City does; `history` lists the tracking
//! beads of its firings, newest first. Text output escapes the orders' text (`api::printable`).
//! With `--json` an order's points in time are RFC 3339, as every time Strand prints
//! (`last_fired_at`, `next_due_at`); its `last_window` is a window's number (a cron minute, an
//! event seq, a time in ms), as the state keeps it.

use std::path::PathBuf;

use api::command::{Command, ListFilter, ListSort, Query};
use api::commands::list::List;
use api::commands::order_get::OrderGet;
use api::commands::order_list::OrderList;
use api::go_duration::format_go_duration;
use api::limits::ORDER_BYTES_MAX;
use api::model::Timestamp;
use api::outcome::{OrderInfo, Outcome};
use api::printable::{printable, printable_block};
use api::state::{ORDER_RUN_LABEL_PREFIX, ORDER_TRACKING_LABEL};
use clap::Subcommand;

use crate::answers::{beads_of, unexpected};
use crate::output::{BLOCK_INDENT, print_beads, print_value};
use crate::values::now_ms;
use crate::work::molecule::read_source_file;
use crate::{Cli, CommandResult, Failure};

/// `strand order ...`.
#[derive(Subcommand, Debug)]
pub enum OrderCommand {
    /// Store an order from its TOML file (`[order]`, as Gas City's orders/*.toml); it replaces
    /// an order of the same name, keeping its firings. Its formula must be stored first.
    Put {
        /// The TOML file.
        file: PathBuf,
        /// The order's name (default: the file's name without `.toml`).
        #[arg(long)]
        name: Option<String>,
    },
    /// Every order, with its trigger, firings and when it is next due.
    List,
    /// One order, with its source.
    Show {
        /// Its name.
        name: String,
    },
    /// Remove an order (its past firings' beads stay).
    Delete {
        /// Its name.
        name: String,
    },
    /// The tracking beads of an order's firings, newest first.
    History {
        /// Its name.
        name: String,
        /// At most this many (0: no limit).
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Fire an order now, whatever its trigger (JSON: the tracking bead, then the wisp).
    Run {
        /// Its name.
        name: String,
    },
}

/// Runs an `order` command.
pub async fn run(cli: &Cli, command: &OrderCommand) -> CommandResult {
    let client = cli.client()?;
    let now = Timestamp(now_ms());
    let answer = match command {
        OrderCommand::Put { file, name } => {
            let name = match name {
                Some(name) => name.clone(),
                None => file.file_stem().map(|stem| stem.to_string_lossy().into_owned()).ok_or_else(|| {
                    Failure::Usage(format!("{} has no file name to name the order after; pass --name", file.display()))
                })?,
            };
            let source = read_source_file(file, "order", ORDER_BYTES_MAX)?;
            client.execute(Command::OrderPut(api::command::OrderPut { name, source })).await?
        }
        OrderCommand::List => client.query(Query::from(OrderList { now })).await?,
        OrderCommand::Show { name } => client.query(Query::from(OrderGet { name: name.clone(), now })).await?,
        OrderCommand::Delete { name } => {
            client.execute(Command::OrderDelete(api::command::OrderDelete { name: name.clone() })).await?;
            if cli.json {
                print_value(&serde_json::json!({ "deleted": name }));
            } else {
                println!("deleted order {}", printable(name));
            }
            return Ok(true);
        }
        OrderCommand::History { name, limit } => {
            let filter = ListFilter {
                labels_all: vec![format!("{ORDER_RUN_LABEL_PREFIX}{name}"), ORDER_TRACKING_LABEL.to_string()],
                all: true,
                limit: *limit,
                sort: ListSort::CreatedDesc,
                ..Default::default()
            };
            let beads = beads_of(client.query(Query::from(List(filter))).await?);
            if beads.is_empty() {
                // No firing yet, or no such order: `order show` refuses the latter with its reason.
                client.query(Query::from(OrderGet { name: name.clone(), now })).await?;
            }
            print_beads(&beads, cli.json);
            return Ok(true);
        }
        OrderCommand::Run { name } => {
            let beads =
                beads_of(client.execute(Command::OrderRun(api::command::OrderRun { name: name.clone() })).await?);
            if cli.json {
                print_beads(&beads, true);
            } else if let [tracking, root, ..] = beads.as_slice() {
                println!(
                    "order {} fired: wisp {} ({}), tracked by {}",
                    printable(name),
                    printable(root.id.as_str()),
                    crate::output::counted((beads.len() - 2) as u64, "step"),
                    printable(tracking.id.as_str())
                );
            }
            return Ok(true);
        }
    };
    let Outcome::Orders(orders) = answer else { return Err(unexpected(&answer)) };
    match command {
        OrderCommand::Show { .. } | OrderCommand::Put { .. } if cli.json => {
            print_value(&orders.first().map(order_json))
        }
        _ if cli.json => print_value(&orders.iter().map(order_json).collect::<Vec<_>>()),
        OrderCommand::Show { .. } => orders.iter().for_each(|order| print_order(order, now)),
        OrderCommand::Put { .. } => {
            for order in &orders {
                let (name, trigger, formula) =
                    (printable(&order.name), printable(&order.trigger), printable(&order.formula));
                println!("stored order {name} ({trigger}, formula {formula})");
            }
        }
        _ => orders.iter().for_each(|order| println!("{}", order_line(order, now))),
    }
    Ok(true)
}

/// An order as `--json` prints it: its fields, with its points in time in RFC 3339.
fn order_json(order: &OrderInfo) -> serde_json::Value {
    let OrderInfo {
        name,
        description,
        formula,
        trigger,
        target,
        enabled,
        fired,
        last_fired_at,
        last_window,
        last_run,
        next_due_ms,
        error,
        source,
    } = order;
    serde_json::json!({
        "name": name,
        "description": description,
        "formula": formula,
        "trigger": trigger,
        "target": target,
        "enabled": enabled,
        "fired": fired,
        "last_fired_at": last_fired_at.map(Timestamp::to_rfc3339),
        "last_window": last_window,
        "last_run": last_run,
        "next_due_at": next_due_ms.map(|ms| Timestamp(ms).to_rfc3339()),
        "error": error,
        "source": source,
    })
}

/// `in 4m0s`, `now`, or `2m0s ago`.
fn relative(ms: i64, now: Timestamp) -> String {
    let span = |delta: i64| format_go_duration(std::time::Duration::from_secs((delta / 1000).unsigned_abs()));
    match ms - now.0 {
        delta if delta >= 1000 => format!("in {}", span(delta)),
        delta if delta <= -1000 => format!("{} ago", span(delta)),
        _ => "now".into(),
    }
}

fn order_line(order: &OrderInfo, now: Timestamp) -> String {
    let name = printable(&order.name);
    if !order.error.is_empty() {
        return format!("{name}  (unreadable: {})", printable(&order.error));
    }
    let target = if order.target.is_empty() { String::new() } else { format!(" -> {}", printable(&order.target)) };
    let state = if order.enabled { String::new() } else { "  disabled".into() };
    let last = order.last_fired_at.map(|time| format!(", last {}", relative(time.0, now))).unwrap_or_default();
    let next = order.next_due_ms.map(|due| format!(", next {}", relative(due, now))).unwrap_or_default();
    let (trigger, formula) = (printable(&order.trigger), printable(&order.formula));
    format!("{name}  {trigger}  {formula}{target}{state}  fired {}{last}{next}", order.fired)
}

/// An order's line, its description (later lines indented) and last run, then its TOML source:
/// a document of its own, its lines as written, with terminal controls escaped.
fn print_order(order: &OrderInfo, now: Timestamp) {
    println!("{}", order_line(order, now));
    if !order.description.is_empty() {
        println!("  {}", printable_block(&order.description, BLOCK_INDENT));
    }
    if !order.last_run.is_empty() {
        println!("  last run: {}", printable(&order.last_run));
    }
    print!("{}", printable_block(&order.source, ""));
    if !order.source.ends_with('\n') {
        println!();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_orders_points_in_time_print_as_rfc3339() {
        let order = OrderInfo {
            name: "digest".into(),
            description: String::new(),
            formula: "patrol".into(),
            trigger: "cooldown 1h0m0s".into(),
            target: String::new(),
            enabled: true,
            fired: 2,
            last_fired_at: Some(Timestamp(1_767_225_600_000)),
            last_window: 1_767_225_600_000,
            last_run: "st-3".into(),
            next_due_ms: Some(1_767_229_200_000),
            error: String::new(),
            source: String::new(),
        };
        let json = order_json(&order);
        assert_eq!(json["last_fired_at"], "2026-01-01T00:00:00.000Z");
        assert_eq!(json["next_due_at"], "2026-01-01T01:00:00.000Z");
        assert_eq!(json["last_window"], 1_767_225_600_000_u64, "a window's number, as the state keeps it");
        assert_eq!((json["name"].as_str(), json["fired"].as_u64()), (Some("digest"), Some(2)));
        assert!(json.get("next_due_ms").is_none(), "{json}");
        let never = order_json(&OrderInfo { last_fired_at: None, next_due_ms: None, ..order });
        assert!(never["last_fired_at"].is_null() && never["next_due_at"].is_null(), "{never}");
    }
}
