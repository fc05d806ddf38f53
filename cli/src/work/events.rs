//! `strand events` and `strand watch`: the namespace's event log (docs/beads.md §7), whose `seq` is
//! gap-free and increasing. `events` lists a page after a seq; `watch` streams until Ctrl-C, and
//! the client resumes it on another node after a disconnect with no event missed and none twice.

use api::command::Query;
use api::commands::events::Events;
use api::limits::{EVENTS_LIMIT_DEFAULT, EVENTS_PER_QUERY_MAX};
use api::model::event_type;
use api::outcome::Outcome;
use clap::Args;
use futures::StreamExt;

use crate::answers::unexpected;
use crate::output::{print_events, write_event_line};
use crate::{Cli, CommandResult, Failure};

/// An event seq: a whole number from 0.
fn parse_seq(text: &str) -> Result<u64, String> {
    text.parse().map_err(|_| format!("expected an event seq, a whole number from 0 to {}", u64::MAX))
}

#[derive(Args, Debug)]
pub struct EventsArgs {
    /// Only events with a seq above this one (0: from the oldest still kept).
    #[arg(long, default_value_t = 0, value_parser = parse_seq)]
    after: u64,
    /// Only events of this type, e.g. bead.created (repeatable).
    #[arg(long = "type", value_name = "TYPE")]
    types: Vec<String>,
    /// At most N (0: the most one request may carry, 10000).
    #[arg(long, default_value_t = EVENTS_LIMIT_DEFAULT)]
    limit: u32,
}

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// Start with the event whose seq is SEQ: every event with seq >= SEQ, so `--from 1` replays
    /// everything still kept. Default: only events that happen after the watch starts. Exit 1 if
    /// events from SEQ on were compacted away.
    #[arg(long, value_name = "SEQ")]
    from: Option<u64>,
    /// Only events of this type, e.g. bead.closed (repeatable).
    #[arg(long = "type", value_name = "TYPE")]
    types: Vec<String>,
}

/// Refuses an event type the store never records (a typo would otherwise match nothing, silently).
fn check_types(types: &[String]) -> Result<(), Failure> {
    match types.iter().find(|name| !event_type::ALL.contains(&name.as_str())) {
        Some(unknown) => Err(Failure::Usage(format!(
            "--type {unknown:?} is not an event type; use one of {}",
            event_type::ALL.join(", ")
        ))),
        None => Ok(()),
    }
}

/// Runs `events`.
pub async fn run_events(cli: &Cli, args: &EventsArgs) -> CommandResult {
    check_types(&args.types)?;
    if args.limit > EVENTS_PER_QUERY_MAX {
        return Err(Failure::Usage(format!(
            "--limit {} is over {EVENTS_PER_QUERY_MAX}; page with --after instead",
            args.limit
        )));
    }
    let query = Query::from(Events { after: args.after, types: args.types.clone(), limit: args.limit });
    let answer = cli.client()?.query(query).await?;
    let Outcome::Events { events, .. } = answer else { return Err(unexpected(&answer)) };
    print_events(&events, cli.json);
    Ok(true)
}

/// The seq a watch resumes after: `--from SEQ` means after SEQ - 1; no `--from` means after the
/// namespace's newest event now.
async fn watch_start(cli: &Cli, client: &api::client::Client, from: Option<u64>) -> Result<u64, Failure> {
    if let Some(from) = from {
        return Ok(from.saturating_sub(1));
    }
    let answer = client.query(Query::Namespaces).await?;
    let Outcome::Namespaces(namespaces) = answer else { return Err(unexpected(&answer)) };
    let newest = namespaces.iter().find(|namespace| namespace.name == cli.namespace());
    // A named namespace that does not exist: the watch's first read is refused by the cluster,
    // as every request to it is.
    if newest.is_none() && !cli.namespace_must_exist(&cli.namespace()) {
        // Said whatever stderr is: a watch of a misspelt namespace would otherwise wait in silence.
        eprintln!(
            "namespace {} does not exist (yet): waiting for its first event; `strand namespace list` shows the namespaces",
            api::printable::printable(&cli.namespace())
        );
    }
    Ok(newest.map_or(0, |namespace| namespace.last_event_seq))
}

/// Runs `watch`: one event per line (compact JSON with `--json`) until Ctrl-C, which exits 0.
pub async fn run_watch(cli: &Cli, args: &WatchArgs) -> CommandResult {
    check_types(&args.types)?;
    let client = cli.client()?;
    let after = watch_start(cli, &client, args.from).await?;
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!("watching for events after seq {after}; Ctrl-C stops");
    }
    let stream = client.watch(after, args.types.clone());
    futures::pin_mut!(stream);
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        tokio::select! {
            // Ctrl-C first: its handler is installed on its first poll, before any event is printed.
            biased;
            signal = &mut interrupted => {
                return signal.map(|()| true).map_err(|error| {
                    Failure::Refused(format!("cannot listen for Ctrl-C ({error}); stop the watch with a signal"))
                });
            }
            next = stream.next() => match next {
                Some(Ok(event)) => {
                    if write_event_line(&event, cli.json).is_err() {
                        // Whoever read the stream has gone (`strand watch | head`): stop quietly.
                        return Ok(true);
                    }
                }
                Some(Err(error)) => return Err(Failure::from(error)),
                None => {
                    return Err(Failure::Unavailable(
                        "the event stream ended; run `strand watch --from SEQ` again with the next seq".into(),
                    ));
                }
            },
        }
    }
}
