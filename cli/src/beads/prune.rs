//! `strand prune`: bd's removal of closed, persistent beads (`purge` is the one for wisps), as
//! Gas City's reaper runs it: `prune --pattern 'gm-*' --older-than 720h --force --json`.
//!
//! It needs `--older-than` or `--pattern`, so that it never means "every closed bead". Without
//! `--force` it previews and exits 1, as bd does; `--dry-run` previews and exits 0. The beads go
//! in transactions of at most [`TXN_WRITES_MAX`], each all or nothing.

use api::command::{Command, ListFilter, Txn};
use api::limits::TXN_WRITES_MAX;
use api::model::{Bead, Status};
use clap::Args;

use crate::beads::listing::{Listing, LocalFilter, SortOrder};
use crate::output::print_value;
use crate::values::now_ms;
use crate::{Cli, CommandResult, Failure};

/// `strand prune`.
#[derive(Args, Debug)]
pub struct PruneArgs {
    /// Only beads closed at least this long ago, in whole days: 7d, 2w, 24h (hours round down
    /// to days, at least one), or a number of days.
    #[arg(long, value_name = "AGE")]
    older_than: Option<String>,
    /// Only ids matching this glob (`*` any run of characters, `?` one).
    #[arg(long, value_name = "GLOB")]
    pattern: Option<String>,
    /// Really delete.
    #[arg(long, short)]
    force: bool,
    /// Count what would go, and delete nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Whether `text` matches a glob of `*` and `?`.
fn glob_matches(pattern: &str, text: &str) -> bool {
    let (pattern, text): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    // Positions in the pattern reachable after each prefix of the text.
    let mut reachable = vec![false; pattern.len() + 1];
    reachable[0] = true;
    let close = |reachable: &mut Vec<bool>| {
        for index in 0..pattern.len() {
            if reachable[index] && pattern[index] == '*' {
                reachable[index + 1] = true;
            }
        }
    };
    close(&mut reachable);
    for c in text {
        let mut next = vec![false; pattern.len() + 1];
        for index in 0..pattern.len() {
            if reachable[index] {
                match pattern[index] {
                    '*' => next[index] = true,
                    '?' => next[index + 1] = true,
                    literal if literal == c => next[index + 1] = true,
                    _ => {}
                }
            }
        }
        close(&mut next);
        reachable = next;
    }
    reachable[pattern.len()]
}

/// Milliseconds in a day.
const DAY_MS: i64 = 86_400_000;

/// An age as bd takes it, in whole days (at least one), in milliseconds: `N` or `Nd` days, `Nw`
/// weeks, `Nh` hours rounded down to days (at least one day).
fn parse_age(text: &str) -> Result<i64, Failure> {
    let bad = || {
        Failure::Usage(format!("--older-than {text:?} is not an age; write 7d, 24h, 2w or a number of days above 0"))
    };
    let (number, unit) = match text.char_indices().last() {
        Some((at, unit)) if unit.is_ascii_alphabetic() => (&text[..at], Some(unit)),
        _ => (text, None),
    };
    let count: i64 = number.parse().ok().filter(|count| *count > 0).ok_or_else(bad)?;
    let days = match unit {
        None | Some('d') => count,
        Some('w') => count.checked_mul(7).ok_or_else(bad)?,
        Some('h') => (count / 24).max(1),
        Some(_) => return Err(bad()),
    };
    days.checked_mul(DAY_MS).ok_or_else(bad)
}

/// Runs `strand prune`.
pub async fn run(cli: &Cli, args: &PruneArgs) -> CommandResult {
    if args.older_than.is_none() && args.pattern.is_none() {
        return Err(Failure::Usage(
            "prune needs --older-than or --pattern, so that it never removes every closed bead".into(),
        ));
    }
    let cutoff = args.older_than.as_deref().map(parse_age).transpose()?.map(|age| now_ms().saturating_sub(age));
    let client = cli.client()?;
    let listing = Listing {
        filter: ListFilter { statuses: vec![Status::Closed], all: true, ..ListFilter::default() },
        local: LocalFilter { hide_ephemeral: true, ..LocalFilter::default() },
        sort: SortOrder::parse("", false)?,
        offset: 0,
        limit: 0,
    };
    let old_enough = |bead: &Bead| cutoff.is_none_or(|cutoff| bead.closed_at.is_some_and(|closed| closed.0 <= cutoff));
    let named = |bead: &Bead| args.pattern.as_deref().is_none_or(|pattern| glob_matches(pattern, &bead.id.0));
    let doomed: Vec<Bead> =
        listing.run(&client).await?.into_iter().filter(|bead| old_enough(bead) && named(bead)).collect();
    if doomed.is_empty() {
        if cli.json {
            print_value(
                &serde_json::json!({ "pruned_count": 0, "message": "No closed beads to prune", "schema_version": 1 }),
            );
        } else {
            println!("No closed beads to prune");
        }
        return Ok(true);
    }
    if args.dry_run || !args.force {
        if cli.json && args.dry_run {
            print_value(&serde_json::json!({ "dry_run": true, "prune_count": doomed.len(), "schema_version": 1 }));
        } else {
            println!("Would prune {} closed bead(s):", doomed.len());
            doomed.iter().for_each(|bead| println!("  {}", crate::output::bead_line(bead)));
        }
        if args.dry_run {
            return Ok(true);
        }
        return Err(Failure::Refused(format!(
            "would prune {} bead(s); use --force to confirm or --dry-run to preview",
            doomed.len()
        )));
    }
    for chunk in doomed.chunks(TXN_WRITES_MAX) {
        let writes = chunk.iter().map(|bead| Command::Delete(api::command::Delete { id: bead.id.clone() })).collect();
        client.execute(Command::Txn(Txn { conditions: Vec::new(), fences: Vec::new(), writes })).await?;
    }
    if cli.json {
        print_value(&serde_json::json!({ "pruned_count": doomed.len(), "schema_version": 1 }));
    } else {
        println!("Pruned {} closed bead(s)", doomed.len());
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_and_ages_read_as_bd_writes_them() {
        for (pattern, text, expected) in [
            ("gm-*", "gm-12", true),
            ("gm-*", "st-12", false),
            ("*-wisp-*", "gc-wisp-3", true),
            ("gc-?", "gc-7", true),
            ("gc-?", "gc-77", false),
            ("*", "", true),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
        ] {
            assert_eq!(glob_matches(pattern, text), expected, "{pattern} ~ {text}");
        }
        assert_eq!(parse_age("7").ok(), Some(7 * DAY_MS));
        assert_eq!(parse_age("720h").ok(), Some(30 * DAY_MS));
        assert_eq!(parse_age("1h").ok(), Some(DAY_MS), "hours round down to days, at least one");
        assert_eq!(parse_age("2w").ok(), Some(14 * DAY_MS));
        for bad in ["soon", "0", "0d", "30m", "-3", ""] {
            assert!(matches!(parse_age(bad), Err(Failure::Usage(_))), "{bad}");
        }
    }
}
