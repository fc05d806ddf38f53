//! `strand tx [FILE]`: bead writes from a JSON document, applied all together or not at all
//! (the cluster's `Txn`), as Gas City's `Tx` and `ApplyGraphPlan` need them.
//!
//! The document is a list of writes, or `{"conditions": [{"id", "revision"}], "fences":
//! [{"id", "lease_id"}], "writes": [...]}`: a fence refuses the whole transaction ("claim lost")
//! once the bead is no longer held under that lease.
//! Each write is an object with `op` and that operation's fields, named as on the exec-store
//! wire: `create` (title, type, priority, labels, parent_id, ref, needs, description, notes,
//! assignee, from, metadata, ephemeral, no_history, defer_until), `update` (id and the fields to
//! change), `set-metadata` (id, metadata; null removes a key), `claim` (id, assignee), `close`
//! (id, reason), `reopen` (id), `delete` (id), `dep-add` (issue, depends_on, type) and
//! `dep-remove` (issue, depends_on). Any write but a create may carry `if_revision`, a condition
//! on its bead.
//! An id `$N` names the bead that write N (from 0) created. The document is checked whole before
//! anything is sent: an unknown op or field is refused, naming the write.

use std::collections::BTreeMap;
use std::path::PathBuf;

use api::command::{Command, Condition, Fence, Txn};
use api::limits::TXN_WRITES_MAX;
use api::model::{Actor, BeadId, DepType};
use api::outcome::Outcome;
use clap::Args;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::output::{BeadJson, bead_line, print_value};
use crate::wire::{CreateInput, UpdateInput};
use crate::{Cli, CommandResult, Failure};

/// `strand tx`.
#[derive(Args, Debug)]
pub struct TxArgs {
    /// The JSON document; `-` or nothing reads stdin.
    file: Option<PathBuf>,
    /// Check the document and print the writes it makes, sending nothing.
    #[arg(long)]
    dry_run: bool,
}

/// The document's object form.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    #[serde(default)]
    conditions: Vec<ConditionInput>,
    #[serde(default)]
    fences: Vec<FenceInput>,
    writes: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FenceInput {
    id: String,
    lease_id: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConditionInput {
    id: String,
    revision: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdInput {
    id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CloseInput {
    id: String,
    reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimInput {
    id: String,
    assignee: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MetadataInput {
    id: String,
    metadata: BTreeMap<String, Option<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EdgeInput {
    issue: String,
    depends_on: String,
    #[serde(rename = "type")]
    dep_type: Option<String>,
}

/// The operations a write may name.
const OPS: &str = "create, update, set-metadata, claim, close, reopen, delete, dep-add, dep-remove";

fn refused(index: usize, reason: impl std::fmt::Display) -> Failure {
    // Counted from 1, as the cluster counts writes in its refusals.
    Failure::Refused(format!("write {} of the transaction: {reason}; nothing was sent", index + 1))
}

fn fields<T: DeserializeOwned>(index: usize, object: serde_json::Map<String, serde_json::Value>) -> Result<T, Failure> {
    serde_json::from_value(serde_json::Value::Object(object)).map_err(|error| refused(index, error))
}

fn no_unknown(index: usize, unknown: &BTreeMap<String, serde_json::Value>) -> Result<(), Failure> {
    match unknown.keys().next() {
        None => Ok(()),
        Some(key) => Err(refused(index, format!("unknown field `{key}`"))),
    }
}

/// One write of the document, and the revision its bead must be at, if any.
fn write_of(cli: &Cli, index: usize, value: serde_json::Value) -> Result<(Command, Option<u64>), Failure> {
    let serde_json::Value::Object(mut object) = value else {
        return Err(refused(index, "a write is a JSON object with an \"op\""));
    };
    let op = match object.remove("op") {
        Some(serde_json::Value::String(op)) => op,
        _ => return Err(refused(index, format!("\"op\" is missing or not a string; use one of {OPS}"))),
    };
    let if_revision = match object.remove("if_revision") {
        None | Some(serde_json::Value::Null) => None,
        Some(value) => Some(value.as_u64().ok_or_else(|| refused(index, "if_revision is not a whole number"))?),
    };
    let id = |text: &String| BeadId::from(text.as_str());
    let command = match op.as_str() {
        "create" => {
            let input: CreateInput = fields(index, object)?;
            no_unknown(index, &input.unknown)?;
            input.command("tx")?
        }
        "update" => {
            let bead = object.remove("id").and_then(|value| value.as_str().map(str::to_string));
            let bead = bead.ok_or_else(|| refused(index, "update needs \"id\""))?;
            let input: UpdateInput = fields(index, object)?;
            no_unknown(index, &input.unknown)?;
            input.command("tx", id(&bead))?
        }
        "set-metadata" => {
            let input: MetadataInput = fields(index, object)?;
            Command::SetMetadata(api::command::SetMetadata { id: id(&input.id), entries: input.metadata })
        }
        "claim" => {
            let input: ClaimInput = fields(index, object)?;
            Command::Claim(api::command::Claim {
                id: id(&input.id),
                actor: Actor(input.assignee.unwrap_or_else(|| cli.actor())),
                lease_ms: None,
            })
        }
        "close" => {
            let input: CloseInput = fields(index, object)?;
            Command::Close(api::command::Close { ids: vec![id(&input.id)], reason: input.reason })
        }
        "reopen" => Command::Reopen(api::command::Reopen { id: id(&fields::<IdInput>(index, object)?.id) }),
        "delete" => Command::Delete(api::command::Delete { id: id(&fields::<IdInput>(index, object)?.id) }),
        "dep-add" => {
            let input: EdgeInput = fields(index, object)?;
            let dep_type = DepType(input.dep_type.unwrap_or_else(|| DepType::BLOCKS.to_string()));
            Command::DepAdd(api::command::DepAdd {
                issue_id: id(&input.issue),
                depends_on_id: id(&input.depends_on),
                dep_type,
            })
        }
        "dep-remove" => {
            let input: EdgeInput = fields(index, object)?;
            if input.dep_type.is_some() {
                return Err(refused(index, "dep-remove takes issue and depends_on only"));
            }
            Command::DepRemove(api::command::DepRemove {
                issue_id: id(&input.issue),
                depends_on_id: id(&input.depends_on),
            })
        }
        other => return Err(refused(index, format!("unknown op {other:?}; use one of {OPS}"))),
    };
    Ok((command, if_revision))
}

/// The bead a write is about, for its `if_revision` condition.
fn subject(command: &Command) -> Option<&BeadId> {
    match command {
        Command::Update(update) => Some(&update.id),
        Command::SetMetadata(api::command::SetMetadata { id, .. })
        | Command::Claim(api::command::Claim { id, .. })
        | Command::Reopen(api::command::Reopen { id })
        | Command::Delete(api::command::Delete { id }) => Some(id),
        Command::Close(api::command::Close { ids, .. }) => ids.first(),
        Command::DepAdd(api::command::DepAdd { issue_id, .. })
        | Command::DepRemove(api::command::DepRemove { issue_id, .. }) => Some(issue_id),
        _ => None,
    }
}

/// Parses and checks a document into the transaction it asks for.
fn transaction(cli: &Cli, text: &str) -> Result<Txn, Failure> {
    let malformed =
        |reason: String| Failure::Refused(format!("the transaction is not valid JSON: {reason}; nothing was sent"));
    let value: serde_json::Value = serde_json::from_str(text).map_err(|error| malformed(error.to_string()))?;
    let document = match value {
        serde_json::Value::Array(writes) => Document { conditions: Vec::new(), fences: Vec::new(), writes },
        object @ serde_json::Value::Object(_) => serde_json::from_value(object).map_err(|error| {
            Failure::Refused(format!(
                "the transaction is an object but not {{\"conditions\": [...], \"fences\": [...], \"writes\": [...]}}: {error}; nothing was sent"
            ))
        })?,
        _ => return Err(malformed("it is neither a list of writes nor an object".into())),
    };
    if document.writes.is_empty() || document.writes.len() > TXN_WRITES_MAX {
        return Err(Failure::Refused(format!(
            "a transaction has 1 to {TXN_WRITES_MAX} writes, this one {}; nothing was sent",
            document.writes.len()
        )));
    }
    let mut conditions: Vec<Condition> = document
        .conditions
        .into_iter()
        .map(|condition| Condition { id: BeadId(condition.id), revision: condition.revision })
        .collect();
    let mut writes = Vec::with_capacity(document.writes.len());
    for (index, value) in document.writes.into_iter().enumerate() {
        let (command, if_revision) = write_of(cli, index, value)?;
        if let Some(revision) = if_revision {
            let Some(id) = subject(&command).filter(|id| !id.0.starts_with('$')) else {
                return Err(refused(index, "if_revision needs an existing bead's id (not a create or a $N)"));
            };
            conditions.push(Condition { id: id.clone(), revision });
        }
        writes.push(command);
    }
    let fences =
        document.fences.into_iter().map(|fence| Fence { id: BeadId(fence.id), lease_id: fence.lease_id }).collect();
    let txn = Txn { conditions, fences, writes };
    // What the cluster checks first, checked here too, so a dry run refuses what a run would.
    api::command::validate_txn(&txn).map_err(|refusal| Failure::Refused(format!("{refusal}; nothing was sent")))?;
    Ok(txn)
}

/// Runs `strand tx`: prints each write's outcome (JSON: `{"results": [bead or null, ...]}`).
pub async fn run(cli: &Cli, args: &TxArgs) -> CommandResult {
    let txn = transaction(cli, &crate::wire::read_request_file(args.file.as_deref())?)?;
    if args.dry_run {
        if cli.json {
            let ops: Vec<&str> = txn.writes.iter().map(Command::name).collect();
            print_value(&serde_json::json!({ "dry_run": true, "conditions": txn.conditions.len(), "writes": ops }));
        } else {
            println!("would apply {} writes after {} conditions", txn.writes.len(), txn.conditions.len());
        }
        return Ok(true);
    }
    let names: Vec<&'static str> = txn.writes.iter().map(Command::name).collect();
    let answer = cli.client()?.execute(Command::Txn(txn)).await?;
    let Outcome::Txn(outcomes) = answer else {
        return Err(Failure::Refused(format!("the cluster answered a transaction with {answer:?}")));
    };
    let beads: Vec<Option<api::model::Bead>> =
        outcomes.into_iter().map(|outcome| crate::answers::beads_of(outcome).into_iter().next()).collect();
    if cli.json {
        let results: Vec<Option<BeadJson>> = beads.iter().map(|bead| bead.as_ref().map(BeadJson::from)).collect();
        print_value(&serde_json::json!({ "results": results, "schema_version": 1 }));
        return Ok(true);
    }
    for (name, bead) in names.iter().zip(&beads) {
        match bead {
            Some(bead) => println!("{name}: {}", bead_line(bead)),
            None => println!("{name}: done"),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn cli() -> Cli {
        Cli::parse_from(["strand", "--actor", "tester", "tx"])
    }

    fn refusal(text: &str) -> String {
        match transaction(&cli(), text) {
            Err(Failure::Refused(message)) => message,
            Err(_) => panic!("{text}: refused as usage"),
            Ok(_) => panic!("{text}: accepted"),
        }
    }

    #[test]
    fn a_list_of_writes_becomes_one_transaction_with_its_conditions() {
        let txn = transaction(
            &cli(),
            r#"[{"op":"create","title":"a","type":"bug","no_history":true},
                {"op":"dep-add","issue":"$0","depends_on":"st-1"},
                {"op":"update","id":"st-1","status":"in_progress","metadata":{"k":"v","gone":null},"if_revision":7},
                {"op":"claim","id":"st-2"},
                {"op":"close","id":"st-3","reason":"done"}]"#,
        )
        .expect("accepted");
        assert_eq!(txn.writes.len(), 5);
        assert_eq!(txn.conditions, vec![Condition { id: BeadId::from("st-1"), revision: 7 }]);
        let Command::Claim(api::command::Claim { actor, .. }) = &txn.writes[3] else { panic!("claim") };
        assert_eq!(actor.0, "tester", "a claim without assignee is the actor's");
        let object = transaction(
            &cli(),
            r#"{"conditions":[{"id":"st-9","revision":3}],"fences":[{"id":"st-9","lease_id":41}],"writes":[{"op":"reopen","id":"st-9"}]}"#,
        )
        .expect("accepted");
        assert_eq!(object.conditions.len(), 1);
        assert_eq!(object.fences, vec![Fence { id: BeadId::from("st-9"), lease_id: 41 }]);
    }

    #[test]
    fn a_bad_document_is_refused_naming_the_write() {
        for (text, expected) in [
            ("[", "not valid JSON"),
            ("[]", "1 to 1000 writes"),
            ("7", "neither a list"),
            (r#"{"writes":[],"extra":1}"#, "unknown field `extra`"),
            (r#"[{"title":"x"}]"#, "write 1 of the transaction: \"op\" is missing"),
            (r#"[{"op":"create","title":"x"},{"op":"frobnicate"}]"#, "write 2 of the transaction: unknown op"),
            (r#"[{"op":"create","title":"x","assigne":"typo"}]"#, "unknown field `assigne`"),
            (r#"[{"op":"update","id":"st-1","stauts":"open"}]"#, "unknown field `stauts`"),
            (r#"[{"op":"update","status":"open"}]"#, "update needs \"id\""),
            (r#"[{"op":"close","id":"st-1","force":true}]"#, "unknown field `force`"),
            (r#"[{"op":"create","title":"x","if_revision":3}]"#, "if_revision needs an existing bead"),
            (r#"[{"op":"update","id":"st-1","if_revision":"3"}]"#, "not a whole number"),
            (r#"[{"op":"create","title":"x","defer_until":"soon"}]"#, "not an RFC 3339 time"),
            (r#"[{"op":"update","id":"st-1","status":"shipped"}]"#, "invalid status"),
            (r#"[{"op":"create","title":""}]"#, "title"),
        ] {
            let message = refusal(text);
            assert!(message.contains(expected), "{text}: {message}");
        }
    }
}
