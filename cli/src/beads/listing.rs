//! `list` and `ready` as bd has them: bd's defaults, filters, sort fields and limits, over the
//! cluster's indexed queries.
//!
//! The filters an index serves (statuses, assignee, labels, type, parent, metadata) go to the
//! cluster; the rest (title text, excluded types and labels, times, priorities) are applied here.
//! A listing pages through the cluster with a keyset cursor on (created_at, seq, id), at most
//! [`LIST_PAGE_BEADS`] beads a page, so no answer of the cluster exceeds a page and `--limit 0`
//! works at any size; the CLI holds the matching beads it prints. In creation order a limit stops
//! the paging early; sorting by another field needs every matching bead first, as in bd.

use std::cmp::Ordering;

use api::client::Client;
use api::command::{ListCursor, ListFilter, ListSort, Query};
use api::commands::list::List;
use api::model::{Bead, Status, Timestamp};

use crate::Failure;
use crate::answers::beads_of;
use crate::beads::gate_fields::GATE_TYPE;

/// Beads one page of a listing asks the cluster for.
pub const LIST_PAGE_BEADS: u32 = 1000;
/// bd's default `list` limit.
pub const LIST_LIMIT_DEFAULT: u32 = 50;
/// Types `list` hides unless `--include-infra` or `--type` names them (bd's infra types).
pub const LIST_INFRA_TYPES: [&str; 4] = ["agent", "rig", "role", "message"];
/// What `--sort` accepts, as bd names them.
pub const SORT_FIELDS: [&str; 9] =
    ["priority", "created", "updated", "closed", "status", "id", "title", "type", "assignee"];
/// Where a bead without a priority sorts: after every priority, as in `ready`.
const UNSET_PRIORITY_RANK: u8 = 5;
/// bd's hybrid ready order treats beads created within this window as recent.
const HYBRID_RECENT_MS: i64 = 48 * 60 * 60 * 1000;

/// Filters the cluster has no index for, applied to each bead.
#[derive(Debug, Default)]
pub struct LocalFilter {
    /// Case-insensitive substring of the title.
    pub title_contains: Option<String>,
    /// Case-insensitive substring of the description.
    pub description_contains: Option<String>,
    /// Case-insensitive substring of the notes.
    pub notes_contains: Option<String>,
    /// Types left out.
    pub exclude_types: Vec<String>,
    /// Labels that leave a bead out.
    pub exclude_labels: Vec<String>,
    /// At least one of these labels.
    pub labels_any: Vec<String>,
    /// Only beads without an assignee.
    pub no_assignee: bool,
    /// Only beads without labels.
    pub no_labels: bool,
    /// Only beads without a parent.
    pub no_parent: bool,
    /// Only beads with an empty description.
    pub empty_description: bool,
    /// Only beads that hold this metadata key.
    pub has_metadata_key: Option<String>,
    /// Only these ids.
    pub ids: Vec<String>,
    /// Priorities allowed, inclusive.
    pub priority_min: Option<u8>,
    /// Priorities allowed, inclusive.
    pub priority_max: Option<u8>,
    /// Time windows, exclusive, in milliseconds.
    pub created_after: Option<i64>,
    pub created_before: Option<i64>,
    pub updated_after: Option<i64>,
    pub updated_before: Option<i64>,
    pub closed_after: Option<i64>,
    pub closed_before: Option<i64>,
    /// Only deferred beads (a deferral time, or status deferred).
    pub deferred: bool,
    /// Only leased beads whose lease lapses (by the wall clock) at or before this time, in ms.
    pub lease_due_by: Option<i64>,
    /// Leave wisps (ephemeral beads) out.
    pub hide_ephemeral: bool,
}

fn contains(haystack: &str, needle: &Option<String>) -> bool {
    needle.as_ref().is_none_or(|needle| haystack.to_lowercase().contains(&needle.to_lowercase()))
}

fn after(time: Option<i64>, bound: Option<i64>) -> bool {
    bound.is_none_or(|bound| time.is_some_and(|time| time > bound))
}

fn before(time: Option<i64>, bound: Option<i64>) -> bool {
    bound.is_none_or(|bound| time.is_some_and(|time| time < bound))
}

impl LocalFilter {
    /// Whether the bead passes every local filter.
    pub fn accepts(&self, bead: &Bead) -> bool {
        let priority = bead.priority;
        contains(&bead.title, &self.title_contains)
            && contains(&bead.description, &self.description_contains)
            && contains(&bead.notes, &self.notes_contains)
            && !self.exclude_types.contains(&bead.bead_type)
            && !self.exclude_labels.iter().any(|label| bead.labels.contains(label))
            && (self.labels_any.is_empty() || self.labels_any.iter().any(|label| bead.labels.contains(label)))
            && (!self.no_assignee || bead.assignee.is_empty())
            && (!self.no_labels || bead.labels.is_empty())
            && (!self.no_parent || bead.parent_id.is_none())
            && (!self.empty_description || bead.description.is_empty())
            && self.has_metadata_key.as_ref().is_none_or(|key| bead.metadata.contains_key(key))
            && (self.ids.is_empty() || self.ids.contains(&bead.id.0))
            && self.priority_min.is_none_or(|min| priority.is_some_and(|priority| priority >= min))
            && self.priority_max.is_none_or(|max| priority.is_some_and(|priority| priority <= max))
            && after(Some(bead.created_at.0), self.created_after)
            && before(Some(bead.created_at.0), self.created_before)
            && after(Some(bead.updated_at.0), self.updated_after)
            && before(Some(bead.updated_at.0), self.updated_before)
            && after(bead.closed_at.map(|time| time.0), self.closed_after)
            && before(bead.closed_at.map(|time| time.0), self.closed_before)
            && (!self.deferred || bead.defer_until.is_some() || bead.status == Status::Deferred)
            && self
                .lease_due_by
                .is_none_or(|bound| bead.lease.as_ref().is_some_and(|lease| lease.expires_at.0 <= bound))
            && !(self.hide_ephemeral && bead.ephemeral)
    }
}

/// Which types `list` hides by default, given `--include-infra`, `--include-gates` and `--type`.
pub fn hidden_types(include_infra: bool, include_gates: bool, bead_type: Option<&str>) -> Vec<String> {
    let mut hidden = Vec::new();
    let named = |candidate: &str| bead_type == Some(candidate);
    if !include_infra {
        hidden.extend(LIST_INFRA_TYPES.iter().filter(|infra| !named(infra)).map(|infra| infra.to_string()));
    }
    // The gate type is hidden unless `--include-gates` or `--type gate`.
    if !include_gates && !named(GATE_TYPE) {
        hidden.push(GATE_TYPE.to_string());
    }
    hidden
}

/// A sort: bd's field name and direction.
#[derive(Clone, Copy, Debug)]
pub struct SortOrder {
    field: &'static str,
    reverse: bool,
}

impl SortOrder {
    /// Parses `--sort` (empty: bd's default order) and `--reverse`.
    pub fn parse(field: &str, reverse: bool) -> Result<SortOrder, Failure> {
        if field.is_empty() {
            return Ok(SortOrder { field: "", reverse });
        }
        let Some(field) = SORT_FIELDS.iter().find(|known| **known == field) else {
            return Err(Failure::Usage(format!("invalid sort field {field:?} (valid: {})", SORT_FIELDS.join(", "))));
        };
        Ok(SortOrder { field, reverse })
    }

    /// Whether the cluster's creation order already is this order (so a limit can stop paging).
    fn creation(self) -> Option<ListSort> {
        match (self.field, self.reverse) {
            ("created", false) => Some(ListSort::CreatedDesc),
            ("created", true) => Some(ListSort::CreatedAsc),
            _ => None,
        }
    }

    fn compare(self, a: &Bead, b: &Bead) -> Ordering {
        let rank = |bead: &Bead| bead.priority.unwrap_or(UNSET_PRIORITY_RANK);
        let newest_first = |a: Option<Timestamp>, b: Option<Timestamp>| match (a, b) {
            (Some(a), Some(b)) => b.cmp(&a),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        };
        let ordering = match self.field {
            "" | "priority" => {
                rank(a).cmp(&rank(b)).then_with(|| b.created_at.cmp(&a.created_at)).then_with(|| a.id.cmp(&b.id))
            }
            "created" => b.created_at.cmp(&a.created_at).then_with(|| b.seq.cmp(&a.seq)),
            "updated" => b.updated_at.cmp(&a.updated_at),
            "closed" => newest_first(a.closed_at, b.closed_at),
            "status" => a.status.as_str().cmp(b.status.as_str()),
            "id" => natural_id(&a.id.0).cmp(&natural_id(&b.id.0)),
            "title" => a.title.to_lowercase().cmp(&b.title.to_lowercase()),
            "type" => a.bead_type.cmp(&b.bead_type),
            "assignee" => a.assignee.cmp(&b.assignee),
            other => unreachable!("sort field {other} was checked in parse"),
        };
        let ordering = ordering.then_with(|| a.id.cmp(&b.id));
        if self.reverse { ordering.reverse() } else { ordering }
    }
}

/// An id ordered as bd orders ids: its prefix, then its number as a number.
fn natural_id(id: &str) -> (&str, u64, &str) {
    match id.rsplit_once('-') {
        Some((prefix, number)) => (prefix, number.parse().unwrap_or(u64::MAX), number),
        None => (id, u64::MAX, ""),
    }
}

/// A `list`: the cluster's part, the local part, the order and the window.
pub struct Listing {
    /// What the cluster filters.
    pub filter: ListFilter,
    /// What is filtered here.
    pub local: LocalFilter,
    /// The order.
    pub sort: SortOrder,
    /// Beads skipped from the start.
    pub offset: u32,
    /// At most this many after the offset; 0: every one.
    pub limit: u32,
}

impl Listing {
    /// Runs the listing, page by page.
    pub async fn run(self, client: &Client) -> Result<Vec<Bead>, Failure> {
        let wanted = (self.limit > 0).then(|| self.offset as usize + self.limit as usize);
        let in_creation_order = self.sort.creation();
        let mut filter = ListFilter { limit: LIST_PAGE_BEADS, ..self.filter };
        filter.sort = in_creation_order.unwrap_or(ListSort::CreatedDesc);
        let mut found = Vec::new();
        loop {
            let page = beads_of(client.query(Query::from(List(filter.clone()))).await?);
            let full = page.len() == LIST_PAGE_BEADS as usize;
            filter.after = page.last().map(ListCursor::after);
            found.extend(page.into_iter().filter(|bead| self.local.accepts(bead)));
            let enough = in_creation_order.is_some() && wanted.is_some_and(|wanted| found.len() >= wanted);
            if !full || enough {
                break;
            }
        }
        if in_creation_order.is_none() {
            found.sort_by(|a, b| self.sort.compare(a, b));
        }
        Ok(window(found, self.offset, self.limit))
    }
}

/// The beads from `offset`, at most `limit` of them (0: all).
pub fn window(beads: Vec<Bead>, offset: u32, limit: u32) -> Vec<Bead> {
    let rest = beads.into_iter().skip(offset as usize);
    if limit == 0 { rest.collect() } else { rest.take(limit as usize).collect() }
}

/// bd's `ready --sort`: `priority` (the cluster's order), `oldest` or `hybrid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadySort {
    /// Priority, then creation (the cluster's ready order).
    Priority,
    /// Oldest first, whatever the priority.
    Oldest,
    /// Beads created within 48 hours first by priority, then older ones oldest first.
    Hybrid,
}

impl ReadySort {
    /// Parses `--sort`.
    pub fn parse(text: &str) -> Result<ReadySort, Failure> {
        match text {
            "" | "priority" => Ok(ReadySort::Priority),
            "oldest" => Ok(ReadySort::Oldest),
            "hybrid" => Ok(ReadySort::Hybrid),
            other => {
                Err(Failure::Usage(format!("invalid sort policy {other:?}; valid values: hybrid, priority, oldest")))
            }
        }
    }

    /// Puts ready beads (in the cluster's order) in this order; `now_ms` dates "recent".
    pub fn apply(self, beads: &mut [Bead], now_ms: i64) {
        match self {
            ReadySort::Priority => {}
            ReadySort::Oldest => beads.sort_by_key(|bead| (bead.created_at, bead.seq)),
            ReadySort::Hybrid => {
                let recent = |bead: &Bead| now_ms - bead.created_at.0 < HYBRID_RECENT_MS;
                // A stable sort keeps the cluster's priority order among recent beads.
                beads.sort_by(|a, b| match (recent(a), recent(b)) {
                    (true, true) => Ordering::Equal,
                    (true, false) => Ordering::Less,
                    (false, true) => Ordering::Greater,
                    (false, false) => (a.created_at, a.seq).cmp(&(b.created_at, b.seq)),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_infra_types_and_gates_are_hidden_unless_asked_for_or_named() {
        assert_eq!(hidden_types(false, false, None).len(), 5);
        assert!(hidden_types(true, true, None).is_empty());
        assert!(!hidden_types(false, false, Some("agent")).contains(&"agent".to_string()));
        assert!(!hidden_types(false, false, Some("gate")).contains(&"gate".to_string()));
    }

    #[test]
    fn an_unknown_sort_field_is_a_usage_error_naming_the_valid_ones() {
        let Err(Failure::Usage(message)) = SortOrder::parse("size", false) else { panic!("refused") };
        assert!(message.contains("priority, created"), "{message}");
        assert!(ReadySort::parse("newest").is_err());
    }
}
