//! bd's `label add|remove|list` and `comment`, over Strand's bead writes.
//!
//! Strand keeps no comment records: `comment ID TEXT` appends the line `[comment] <author>: TEXT`
//! to the bead's notes, the field bd keeps running notes in, and prints the comment in bd's
//! shape. The cluster counts those lines ([`api::model::comment_count`]): a bead's
//! `comment_count` in `list` and `ready`, which Gas City's wisp compaction reads.

use api::command::{Command, Query, UpdateBead};
use api::commands::get::Get;
use api::model::{BeadId, COMMENT_MARK};
use api::printable::printable;
use clap::Subcommand;

use crate::answers::{beads_of, one_bead};
use crate::beads::write_fenced;
use crate::output::print_value;
use crate::{Cli, CommandResult, Failure};

#[derive(Subcommand, Debug)]
pub enum LabelCommand {
    /// Add a label to beads: `label add ID... LABEL` (JSON: an array of {issue_id, label, status}).
    Add {
        /// The beads, then the label.
        #[arg(required = true, num_args = 2.., value_name = "ID... LABEL")]
        words: Vec<String>,
    },
    /// Remove a label from beads: `label remove ID... LABEL`.
    #[command(visible_alias = "rm")]
    Remove {
        /// The beads, then the label.
        #[arg(required = true, num_args = 2.., value_name = "ID... LABEL")]
        words: Vec<String>,
    },
    /// A bead's labels (JSON: an array of strings).
    List {
        /// The bead.
        id: String,
    },
}

/// Runs a `label` command.
pub async fn run_label(cli: &Cli, command: &LabelCommand) -> CommandResult {
    let client = cli.client()?;
    let (words, adding) = match command {
        LabelCommand::List { id } => {
            let bead =
                one_bead(client.query(Query::from(Get { ids: vec![BeadId::from(id.as_str())] })).await?, "bead")?;
            if cli.json {
                print_value(&bead.labels);
            } else {
                bead.labels.iter().for_each(|label| println!("{}", printable(label)));
            }
            return Ok(true);
        }
        LabelCommand::Add { words } => (words, true),
        LabelCommand::Remove { words } => (words, false),
    };
    let (label, ids) = words.split_last().expect("clap requires two words");
    if label.is_empty() {
        return Err(Failure::Usage("the label is empty; write `label add ID... LABEL`".into()));
    }
    let mut rows = Vec::with_capacity(ids.len());
    for id in ids {
        let mut update = UpdateBead { id: BeadId::from(id.as_str()), ..UpdateBead::default() };
        if adding {
            update.add_labels.insert(label.clone());
        } else {
            update.remove_labels.insert(label.clone());
        }
        write_fenced(cli, &client, id, Command::Update(update)).await?;
        let status = if adding { "added" } else { "removed" };
        if !cli.json {
            let direction = if adding { "to" } else { "from" };
            println!("{status} label {} {direction} {}", printable(label), printable(id));
        }
        rows.push(serde_json::json!({ "issue_id": id, "label": label, "status": status }));
    }
    if cli.json {
        print_value(&rows);
    }
    Ok(true)
}

/// The line a comment adds to the notes: [`COMMENT_MARK`], then `<author>: TEXT`.
fn comment_line(author: &str, text: &str) -> String {
    format!("{COMMENT_MARK}{author}: {text}")
}

/// Runs `comment ID TEXT`: appends `[comment] <actor>: TEXT` to the notes.
pub async fn run_comment(cli: &Cli, id: &str, words: &[String]) -> CommandResult {
    let text = words.join(" ");
    if text.trim().is_empty() {
        return Err(Failure::Usage("the comment is empty; write `comment ID TEXT`".into()));
    }
    let author = cli.actor();
    let update =
        UpdateBead { id: BeadId::from(id), append_notes: Some(comment_line(&author, &text)), ..UpdateBead::default() };
    let bead = beads_of(write_fenced(cli, &cli.client()?, id, Command::Update(update)).await?)
        .pop()
        .ok_or_else(|| Failure::Refused("the cluster answered the comment with no bead".into()))?;
    if cli.json {
        print_value(&serde_json::json!({
            "id": bead.revision.to_string(),
            "issue_id": bead.id.0,
            "author": author,
            "text": text,
            "created_at": bead.updated_at.to_rfc3339(),
            "schema_version": 1,
        }));
    } else {
        println!("comment added to {} (kept in its notes)", printable(id));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_comment_is_one_counted_line_of_the_notes() {
        let line = comment_line("alice", "looked into it");
        assert_eq!(line, "[comment] alice: looked into it");
        let notes = format!("root cause: a race\n{line}\nfixed in abc123\n{}", comment_line("bob", "two\nlines"));
        assert_eq!(api::model::comment_count(&notes), 2);
    }
}
