//! The bead fields of Gas City's exec-store wire (`type`, `parent_id`, `ref`, `needs`, ...) as
//! JSON input, shared by `exec-store create|update` and the writes of `strand tx`; and the bounded
//! reading of such input ([`read_request`]), shared by `exec-store`, `tx` and `create --graph`.
//!
//! Fields the input does not know are collected in `unknown`: the exec store ignores them (the
//! orchestrator adds fields over time), `strand tx` refuses them (a misspelt field must not be
//! dropped from a transaction). A field of the wrong type makes the input malformed either way.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;

use api::command::{Command, CreateBead, UpdateBead};
use api::convert::parse_status;
use api::limits::REQUEST_BYTES_MAX;
use api::model::{BeadId, Timestamp};
use serde::Deserialize;

use crate::Failure;

fn error(message: String) -> Failure {
    Failure::Refused(message)
}

/// Reads a request's input whole, never more than a request may carry plus one byte, and
/// refuses it when it is over: `source` names it in the errors.
pub fn read_request(reader: impl Read, source: &str) -> Result<String, Failure> {
    let mut text = String::new();
    reader
        .take(REQUEST_BYTES_MAX as u64 + 1)
        .read_to_string(&mut text)
        .map_err(|io_error| error(format!("cannot read {source} as UTF-8 text: {io_error}")))?;
    if text.len() > REQUEST_BYTES_MAX {
        return Err(error(format!("{source} is over the request limit of {REQUEST_BYTES_MAX} bytes; send less")));
    }
    Ok(text)
}

/// [`read_request`] of a file, or of stdin when there is none or it is `-`.
pub fn read_request_file(file: Option<&Path>) -> Result<String, Failure> {
    match file.filter(|path| path.as_os_str() != "-") {
        Some(path) => {
            let source = path.display().to_string();
            let opened =
                std::fs::File::open(path).map_err(|io_error| error(format!("cannot open {source}: {io_error}")))?;
            read_request(opened, &source)
        }
        None => {
            say_when_reading_a_terminal("the transaction (a JSON document)");
            read_request(std::io::stdin(), "stdin")
        }
    }
}

/// Says on stderr what a command waits for when its standard input is a terminal, where a silent
/// wait looks like a hang: `what` is read from it until Ctrl-D.
pub fn say_when_reading_a_terminal(what: &str) {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        eprintln!("reading {what} from standard input; end it with Ctrl-D (or give a FILE)");
    }
}

/// A create: every field optional but `title`, which the cluster checks.
#[derive(Deserialize)]
pub struct CreateInput {
    title: Option<String>,
    #[serde(rename = "type")]
    bead_type: Option<String>,
    priority: Option<u8>,
    labels: Option<Vec<String>>,
    parent_id: Option<String>,
    #[serde(rename = "ref")]
    reference: Option<String>,
    needs: Option<Vec<String>>,
    description: Option<String>,
    notes: Option<String>,
    assignee: Option<String>,
    from: Option<String>,
    metadata: Option<BTreeMap<String, String>>,
    ephemeral: Option<bool>,
    no_history: Option<bool>,
    defer_until: Option<String>,
    /// Fields this input does not know.
    #[serde(flatten)]
    pub unknown: BTreeMap<String, serde_json::Value>,
}

/// An update: a missing or null field is unchanged; `labels` are added; a metadata key set to
/// null is removed.
#[derive(Deserialize)]
pub struct UpdateInput {
    title: Option<String>,
    status: Option<String>,
    #[serde(rename = "type")]
    bead_type: Option<String>,
    priority: Option<u8>,
    description: Option<String>,
    notes: Option<String>,
    append_notes: Option<String>,
    parent_id: Option<String>,
    assignee: Option<String>,
    labels: Option<Vec<String>>,
    remove_labels: Option<Vec<String>>,
    metadata: Option<BTreeMap<String, Option<String>>>,
    /// Fields this input does not know.
    #[serde(flatten)]
    pub unknown: BTreeMap<String, serde_json::Value>,
}

impl CreateInput {
    /// The create command; `op` names the operation in errors.
    pub fn command(self, op: &str) -> Result<Command, Failure> {
        let defer_until = self
            .defer_until
            .map(|text| {
                Timestamp::parse_rfc3339(&text).ok_or_else(|| {
                    error(format!("{op}: defer_until {text:?} is not an RFC 3339 time; nothing was written"))
                })
            })
            .transpose()?;
        Ok(Command::Create(CreateBead {
            title: self.title.unwrap_or_default(),
            description: self.description.unwrap_or_default(),
            notes: self.notes.unwrap_or_default(),
            bead_type: self.bead_type.unwrap_or_default(),
            priority: self.priority,
            assignee: self.assignee.unwrap_or_default(),
            from: self.from.unwrap_or_default(),
            parent_id: self.parent_id.filter(|parent| !parent.is_empty()).map(BeadId),
            reference: self.reference.unwrap_or_default(),
            needs: self.needs.unwrap_or_default().into_iter().filter(|need| !need.is_empty()).collect(),
            labels: self.labels.unwrap_or_default().into_iter().filter(|label| !label.is_empty()).collect(),
            metadata: self.metadata.unwrap_or_default(),
            ephemeral: self.ephemeral.unwrap_or(false),
            no_history: self.no_history.unwrap_or(false),
            defer_until,
            requested_status: None,
        }))
    }
}

impl UpdateInput {
    /// The update command of bead `id`; `op` names the operation in errors.
    pub fn command(self, op: &str, id: BeadId) -> Result<Command, Failure> {
        let status = self
            .status
            .map(|text| parse_status(&text).map_err(|refusal| error(format!("{op}: {refusal}; nothing was written"))))
            .transpose()?;
        Ok(Command::Update(UpdateBead {
            id,
            title: self.title,
            description: self.description,
            notes: self.notes,
            append_notes: self.append_notes,
            status,
            bead_type: self.bead_type,
            priority: self.priority,
            assignee: self.assignee,
            parent_id: self.parent_id.map(BeadId),
            add_labels: self.labels.unwrap_or_default().into_iter().collect::<BTreeSet<_>>(),
            remove_labels: self.remove_labels.unwrap_or_default().into_iter().collect(),
            metadata: self.metadata.unwrap_or_default(),
            claim_for: None,
            lease_ms: None,
            // Gas City's update does not change these (its `UpdateOpts` has no such field).
            ephemeral: None,
            no_history: None,
        }))
    }
}
