//! How the CLI prints beads: the JSON shape `bd` prints (with Strand's extra fields), and a
//! one-line-per-bead text form. Lists are always arrays, `[]` when empty, never `null`.

use std::collections::BTreeMap;

use api::model::{Bead, Dependency};
use serde::Serialize;

/// A bead as printed with `--json`.
#[derive(Serialize)]
pub struct BeadJson<'a> {
    id: &'a str,
    title: &'a str,
    description: &'a str,
    status: &'a str,
    #[serde(rename = "type")]
    bead_type: &'a str,
    /// `bd` calls the type `issue_type`; both are printed so either reader works.
    issue_type: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    priority: Option<u8>,
    assignee: &'a str,
    from: &'a str,
    parent_id: String,
    #[serde(rename = "ref")]
    reference: &'a str,
    needs: Vec<String>,
    labels: Vec<&'a str>,
    metadata: &'a BTreeMap<String, String>,
    ephemeral: bool,
    created_at: String,
    updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    closed_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    close_reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    defer_until: Option<String>,
    dependencies: Vec<DependencyJson>,
}

/// A dependency row `{issue_id, depends_on_id, type}`.
#[derive(Serialize)]
pub struct DependencyJson {
    issue_id: String,
    depends_on_id: String,
    #[serde(rename = "type")]
    dep_type: String,
}

impl From<&Dependency> for DependencyJson {
    fn from(dependency: &Dependency) -> Self {
        DependencyJson {
            issue_id: dependency.issue_id.0.clone(),
            depends_on_id: dependency.depends_on_id.0.clone(),
            dep_type: dependency.dep_type.0.clone(),
        }
    }
}

impl<'a> From<&'a Bead> for BeadJson<'a> {
    fn from(bead: &'a Bead) -> Self {
        BeadJson {
            id: &bead.id.0,
            title: &bead.title,
            description: &bead.description,
            status: bead.status.as_str(),
            bead_type: &bead.bead_type,
            issue_type: &bead.bead_type,
            priority: bead.priority,
            assignee: &bead.assignee,
            from: &bead.from,
            parent_id: bead.parent_id.as_ref().map(|id| id.0.clone()).unwrap_or_default(),
            reference: &bead.reference,
            needs: bead.needs().into_iter().map(|id| id.0).collect(),
            labels: bead.labels.iter().map(String::as_str).collect(),
            metadata: &bead.metadata,
            ephemeral: bead.ephemeral,
            created_at: bead.created_at.to_rfc3339(),
            updated_at: bead.updated_at.to_rfc3339(),
            started_at: bead.started_at.map(|time| time.to_rfc3339()),
            closed_at: bead.closed_at.map(|time| time.to_rfc3339()),
            close_reason: bead.close_reason.as_deref(),
            defer_until: bead.defer_until.map(|time| time.to_rfc3339()),
            dependencies: bead.dependencies().iter().map(DependencyJson::from).collect(),
        }
    }
}

fn print_json<T: Serialize>(value: &T) {
    println!("{}", serde_json::to_string_pretty(value).expect("JSON output serializes"));
}

/// One line for a bead: `id [status] P? title (@assignee)`.
pub fn bead_line(bead: &Bead) -> String {
    let priority = bead.priority.map(|priority| format!(" P{priority}")).unwrap_or_default();
    let assignee = if bead.assignee.is_empty() { String::new() } else { format!(" @{}", bead.assignee) };
    format!("{} [{}]{priority} {}{assignee}", bead.id, bead.status, bead.title)
}

/// Prints one bead (an object in JSON).
pub fn print_bead(bead: &Bead, json: bool) {
    if json {
        print_json(&BeadJson::from(bead));
        return;
    }
    println!("{}", bead_line(bead));
    let fields = [
        ("type", bead.bead_type.clone()),
        ("parent", bead.parent_id.as_ref().map(|id| id.0.clone()).unwrap_or_default()),
        ("labels", bead.labels.iter().cloned().collect::<Vec<_>>().join(", ")),
        ("needs", bead.needs().iter().map(|id| id.0.clone()).collect::<Vec<_>>().join(", ")),
        ("created", bead.created_at.to_rfc3339()),
        ("description", bead.description.clone()),
    ];
    for (name, value) in fields {
        if !value.is_empty() {
            println!("  {name}: {value}");
        }
    }
    for (key, value) in &bead.metadata {
        println!("  metadata {key} = {value}");
    }
}

/// Prints beads (an array in JSON, one line each in text).
pub fn print_beads(beads: &[Bead], json: bool) {
    if json {
        print_json(&beads.iter().map(BeadJson::from).collect::<Vec<_>>());
        return;
    }
    for bead in beads {
        println!("{}", bead_line(bead));
    }
}

/// Prints dependency rows.
pub fn print_dependencies(rows: &[Dependency], json: bool) {
    if json {
        print_json(&rows.iter().map(DependencyJson::from).collect::<Vec<_>>());
        return;
    }
    for row in rows {
        println!("{} -> {} ({})", row.issue_id, row.depends_on_id, row.dep_type.0);
    }
}

/// Prints any serializable value as JSON.
pub fn print_value<T: Serialize>(value: &T) {
    print_json(value);
}
