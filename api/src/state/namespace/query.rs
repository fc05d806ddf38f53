//! Reads of one namespace, each served from the smallest index that answers it.
//!
//! `ready` walks a ready index in ready order and stops at the limit, so `ready --limit 1` costs
//! the same over a million beads as over a hundred; `list` walks the smallest of the indexes its
//! filters name. Only filters that no index serves are checked bead by bead. A listing is its
//! memory index (held beads) merged with its entries on disk (cold beads, [`Source`]).

use std::collections::BTreeSet;

use super::{BeadRef, NamespaceState};
use crate::input::{DepDirection, ListCursor, ListFilter, ListSort, ReadyFilter};
use crate::limits::LIST_RESULTS_MAX;
use crate::model::{Bead, BeadId, Dependency, Status, Timestamp};
use crate::outcome::{Outcome, Refusal};
use crate::state::closed_index::Listing;
use crate::state::index::{CreatedKey, ReadyIndex, ReadyKey};

/// The effective cap of a list: `limit`, or [`LIST_RESULTS_MAX`] + 1 when unlimited, so an
/// over-long unlimited answer can be detected and refused.
fn cap(limit: u32) -> usize {
    if limit == 0 { LIST_RESULTS_MAX + 1 } else { (limit as usize).min(LIST_RESULTS_MAX) }
}

fn check_cap(limit: u32, found: usize) -> Result<(), Refusal> {
    if limit == 0 && found > LIST_RESULTS_MAX {
        return Err(Refusal::TooManyResults { limit: LIST_RESULTS_MAX });
    }
    Ok(())
}

impl NamespaceState {
    fn ready_source<'a>(index: &'a ReadyIndex, filter: &ReadyFilter) -> Option<&'a BTreeSet<ReadyKey>> {
        if let Some(assignee) = &filter.assignee {
            return index.by_assignee.get(assignee);
        }
        if filter.unassigned {
            return index.by_assignee.get("");
        }
        if let Some(label) = filter.labels_all.first() {
            return index.by_label.get(label);
        }
        Some(&index.all)
    }

    fn matches_ready(&self, bead: &Bead, filter: &ReadyFilter, now: Timestamp) -> bool {
        let has = |label: &String| bead.labels.contains(label);
        let metadata_ok = filter.metadata_equals.iter().all(|(key, value)| bead.metadata.get(key) == Some(value))
            && filter.metadata_has_keys.iter().all(|key| bead.metadata.contains_key(key));
        filter.assignee.as_ref().is_none_or(|assignee| &bead.assignee == assignee)
            && (!filter.unassigned || bead.assignee.is_empty())
            && filter.labels_all.iter().all(has)
            && (filter.labels_any.is_empty() || filter.labels_any.iter().any(has))
            && !filter.exclude_labels.iter().any(has)
            && metadata_ok
            && (filter.types.is_empty() || filter.types.contains(&bead.bead_type))
            && !filter.exclude_types.contains(&bead.bead_type)
            && bead.defer_until.is_none_or(|until| until <= now)
            && filter.parent.as_ref().is_none_or(|parent| bead.id != *parent && self.is_below(&bead.id, parent))
    }

    /// Ids of ready beads matching the filter and `accept`, in ready order, up to the limit.
    pub(in crate::state) fn ready_ids(
        &self,
        filter: &ReadyFilter,
        now: Timestamp,
        accept: impl Fn(&Bead) -> bool,
    ) -> Result<Vec<BeadId>, Refusal> {
        let limit = cap(filter.limit);
        let mut sources = vec![&self.indexes.ready];
        if filter.include_ephemeral {
            sources.push(&self.indexes.ready_ephemeral);
        }
        let mut found: Vec<&ReadyKey> = Vec::new();
        for index in sources {
            let Some(source) = Self::ready_source(index, filter) else { continue };
            let matching = source.iter().filter(|key| {
                let bead = self.beads.at(&key.created.id);
                self.matches_ready(&bead, filter, now) && accept(&bead)
            });
            found.extend(matching.take(limit));
        }
        found.sort();
        found.truncate(limit);
        check_cap(filter.limit, found.len())?;
        Ok(found.into_iter().map(|key| (*key.created.id).clone()).collect())
    }

    /// `ready` (docs/beads.md §4).
    pub(crate) fn ready(&self, filter: &ReadyFilter, now: Timestamp) -> Result<Outcome, Refusal> {
        let ids = self.ready_ids(filter, now, |_| true)?;
        Ok(Outcome::Beads(ids.iter().map(|bead_id| self.beads.at(bead_id).clone()).collect()))
    }

    /// The source of the beads with `status`: its memory index, and the cold beads' listing of
    /// every bead when it is `closed` (a cold bead is closed).
    fn status_source(&self, status: Status) -> Source<'_> {
        Source { held: self.indexes.by_status.get(&status), cold: (status == Status::Closed).then_some(Listing::All) }
    }

    fn list_sources<'a>(&'a self, filter: &'a ListFilter) -> Vec<Source<'a>> {
        let indexes = &self.indexes;
        let mut sources = Vec::new();
        if let Some(parent) = &filter.parent {
            sources.push(Source { held: indexes.children.get(parent), cold: Some(Listing::Parent(parent)) });
        }
        if let Some(label) = filter.labels_all.first() {
            sources.push(Source { held: indexes.by_label.get(label), cold: Some(Listing::Label(label)) });
        }
        if let Some(assignee) = &filter.assignee {
            sources.push(Source { held: indexes.by_assignee.get(assignee), cold: Some(Listing::Assignee(assignee)) });
        }
        if let Some(bead_type) = &filter.bead_type {
            sources.push(Source { held: indexes.by_type.get(bead_type), cold: Some(Listing::Type(bead_type)) });
        }
        if let [status] = filter.statuses.as_slice() {
            sources.push(self.status_source(*status));
        }
        sources
    }

    /// Whether the bead under `key` matches the list's filters but `metadata_equals`, judged on
    /// the indexes alone (each is keyed by the field the filter names), so that a closed bead kept
    /// on disk that a filter rejects is never read back; only `metadata_equals` reads the bead.
    /// A cold bead is in no memory index: it is judged on its status here, and on its fields once
    /// read back ([`cold_bead_matches_list`]).
    fn key_may_match_list(&self, key: &CreatedKey, filter: &ListFilter) -> bool {
        let in_set = |set: Option<&BTreeSet<CreatedKey>>| set.is_some_and(|set| set.contains(key));
        let indexes = &self.indexes;
        let status = self.beads.status(&key.id);
        let include_closed = filter.all || filter.statuses.contains(&Status::Closed);
        let status_matches = (include_closed || status != Some(Status::Closed))
            && (filter.statuses.is_empty() || status.is_some_and(|status| filter.statuses.contains(&status)));
        if !status_matches || self.beads.is_cold(&key.id) {
            return status_matches;
        }
        filter.assignee.as_ref().is_none_or(|assignee| in_set(indexes.by_assignee.get(assignee)))
            && filter.labels_all.iter().all(|label| in_set(indexes.by_label.get(label)))
            && filter.bead_type.as_ref().is_none_or(|bead_type| in_set(indexes.by_type.get(bead_type)))
            && filter.parent.as_ref().is_none_or(|parent| in_set(indexes.children.get(parent)))
    }

    /// `list`: filters AND-ed, closed left out unless asked, newest first by default.
    pub(crate) fn list(&self, filter: &ListFilter) -> Result<Outcome, Refusal> {
        if filter.is_unfiltered() && !filter.all {
            return Err(Refusal::UnfilteredList);
        }
        let accept = (
            |key: &CreatedKey| self.key_may_match_list(key, filter),
            |bead: &Bead| {
                (!self.beads.is_cold(&bead.id) || cold_bead_matches_list(bead, filter))
                    && filter.metadata_equals.iter().all(|(key, value)| bead.metadata.get(key) == Some(value))
            },
        );
        let after = filter.after.as_ref().map(cursor_key);
        let sources = self.list_sources(filter);
        let smallest = sources.into_iter().min_by_key(|source| self.source_len(*source));
        if filter.statuses.len() > 1 {
            // Several statuses: walk their indexes merged in order (a bead is in one of them, and a
            // status named twice is walked once), unless another filter's index is smaller.
            let mut distinct = filter.statuses.clone();
            distinct.sort_unstable();
            distinct.dedup();
            let statuses: Vec<Source<'_>> = distinct.iter().map(|status| self.status_source(*status)).collect();
            let total: usize = statuses.iter().map(|source| self.source_len(*source)).sum();
            if smallest.is_none_or(|source| total < self.source_len(source)) {
                let walks =
                    statuses.into_iter().map(|source| self.source_keys(source, filter.sort, after.as_ref())).collect();
                let beads = self.walk_keys(merged(walks, filter.sort), filter.limit, accept)?;
                return Ok(Outcome::Beads(beads));
            }
        }
        // No index serves the filters (metadata only, or none with --all): walk every bead.
        let source = smallest.unwrap_or(Source { held: Some(&self.indexes.all), cold: Some(Listing::All) });
        let beads = self.walk_keys(self.source_keys(source, filter.sort, after.as_ref()), filter.limit, accept)?;
        Ok(Outcome::Beads(beads))
    }

    /// How many beads `source` lists.
    pub(super) fn source_len(&self, source: Source<'_>) -> usize {
        let held = source.held.map_or(0, BTreeSet::len);
        held + source.cold.map_or(0, |listing| self.cold_counts.get(listing) as usize)
    }

    /// The keys `source` lists, held and cold beads' merged, in `sort` order, strictly after
    /// `after` in that order when given. A cold listing's entries on disk count only for cold
    /// beads (a closed bead held in memory is in the memory index).
    pub(super) fn source_keys<'a>(
        &'a self,
        source: Source<'a>,
        sort: ListSort,
        after: Option<&CreatedKey>,
    ) -> Box<dyn Iterator<Item = CreatedKey> + 'a> {
        let held = source.held.map(|set| in_order(set, sort, after).cloned());
        let cold = source
            .cold
            .filter(|listing| self.cold_counts.get(*listing) > 0)
            .and_then(|listing| self.beads.cold_listing(listing, sort == ListSort::CreatedDesc, after))
            .map(move |keys| keys.filter(move |key| self.beads.is_cold(&key.id)));
        match (held, cold) {
            (Some(held), Some(cold)) => Box::new(merged(vec![Box::new(held), Box::new(cold)], sort)),
            (Some(held), None) => Box::new(held),
            (None, Some(cold)) => Box::new(cold),
            (None, None) => Box::new(std::iter::empty()),
        }
    }

    /// The accepted beads of `keys`, in their order, up to `limit`: `accept.0` judges a key on
    /// the indexes first, and only a bead it lets through is read (from disk, if it is cold) for
    /// `accept.1` to judge.
    fn walk_keys(
        &self,
        keys: impl Iterator<Item = CreatedKey>,
        limit: u32,
        accept: (impl Fn(&CreatedKey) -> bool, impl Fn(&Bead) -> bool),
    ) -> Result<Vec<Bead>, Refusal> {
        let (key_may_match, accept) = accept;
        let beads: Vec<Bead> = keys
            .filter(|key| key_may_match(key))
            .map(|key| self.beads.at(&key.id))
            .filter(|bead| accept(bead))
            .take(cap(limit))
            .map(BeadRef::into_owned)
            .collect();
        check_cap(limit, beads.len())?;
        Ok(beads)
    }

    /// Beads whose parent is this id (store invariant 10), oldest first.
    pub(crate) fn children(&self, parent: &BeadId, include_closed: bool) -> Result<Outcome, Refusal> {
        let source =
            Source { held: self.indexes.children.get(parent), cold: include_closed.then_some(Listing::Parent(parent)) };
        let beads = self.walk_keys(
            self.source_keys(source, ListSort::CreatedAsc, None),
            0,
            (|key: &CreatedKey| include_closed || self.beads.status(&key.id) != Some(Status::Closed), |_: &Bead| true),
        )?;
        Ok(Outcome::Beads(beads))
    }

    /// Beads with exactly this label, newest first, closed included (store invariant 11).
    pub(crate) fn list_by_label(&self, label: &str, limit: u32) -> Result<Outcome, Refusal> {
        let source = Source { held: self.indexes.by_label.get(label), cold: Some(Listing::Label(label)) };
        Ok(Outcome::Beads(self.walk_keys(
            self.source_keys(source, ListSort::CreatedDesc, None),
            limit,
            (|_: &CreatedKey| true, |_: &Bead| true),
        )?))
    }

    /// Edges of a bead; an unknown id has none.
    pub(crate) fn dep_list(&self, bead_id: &BeadId, direction: DepDirection) -> Outcome {
        let loose_rows = |source: &BeadId| -> Vec<Dependency> {
            let edges = self.loose_edges.get(source).into_iter().flatten();
            edges
                .map(|(target, dep_type)| Dependency {
                    issue_id: source.clone(),
                    depends_on_id: target.clone(),
                    dep_type: dep_type.clone(),
                })
                .collect()
        };
        let rows: Vec<Dependency> = match direction {
            DepDirection::Down => match self.beads.get(bead_id) {
                Some(bead) => bead.dependencies(),
                None => loose_rows(bead_id),
            },
            DepDirection::Up => {
                let from_beads = self
                    .dependents_of(bead_id)
                    .iter()
                    .filter_map(|dependent| self.beads.get(dependent))
                    .flat_map(|bead| bead.dependencies())
                    .filter(|row| &row.depends_on_id == bead_id)
                    .collect::<Vec<_>>();
                let from_loose = self.loose_dependents_of(bead_id).iter().flat_map(loose_rows).collect::<Vec<_>>();
                let from_loose = from_loose.into_iter().filter(|row| &row.depends_on_id == bead_id);
                from_beads.into_iter().chain(from_loose).collect()
            }
        };
        Outcome::Dependencies(rows)
    }

    /// The beads of these ids that exist, in the order asked.
    pub(crate) fn lookup(&self, ids: &[BeadId]) -> Outcome {
        Outcome::Beads(ids.iter().filter_map(|bead_id| self.beads.get(bead_id).map(BeadRef::into_owned)).collect())
    }

    /// Beads by id; every id must exist.
    pub(crate) fn get(&self, ids: &[BeadId]) -> Result<Outcome, Refusal> {
        let beads = ids.iter().map(|bead_id| self.bead(bead_id).map(BeadRef::into_owned)).collect::<Result<_, _>>()?;
        Ok(Outcome::Beads(beads))
    }
}

/// A creation-ordered set's keys in `sort` order, strictly after `after` when given.
fn in_order<'a>(
    set: &'a BTreeSet<CreatedKey>,
    sort: ListSort,
    after: Option<&CreatedKey>,
) -> Box<dyn Iterator<Item = &'a CreatedKey> + 'a> {
    use std::ops::Bound::{Excluded, Unbounded};
    match (sort, after) {
        (ListSort::CreatedAsc, None) => Box::new(set.iter()),
        (ListSort::CreatedAsc, Some(key)) => Box::new(set.range((Excluded(key.clone()), Unbounded))),
        (ListSort::CreatedDesc, None) => Box::new(set.iter().rev()),
        (ListSort::CreatedDesc, Some(key)) => Box::new(set.range((Unbounded, Excluded(key.clone()))).rev()),
    }
}

/// The index key a cursor stands for.
fn cursor_key(cursor: &ListCursor) -> CreatedKey {
    CreatedKey { created_at: cursor.created_at, seq: cursor.seq, id: std::sync::Arc::new(cursor.id.clone()) }
}

/// The keys of disjoint creation-ordered walks (a bead has one status; a bead is held or cold),
/// each in `sort` order, as one sequence in `sort` order: each step takes the first of the walks'
/// next keys.
fn merged<'a>(
    walks: Vec<Box<dyn Iterator<Item = CreatedKey> + 'a>>,
    sort: ListSort,
) -> impl Iterator<Item = CreatedKey> + 'a {
    let mut heads: Vec<_> = walks.into_iter().map(Iterator::peekable).collect();
    std::iter::from_fn(move || {
        let (first, _) =
            heads.iter_mut().enumerate().filter_map(|(index, head)| head.peek().map(|key| (index, key))).min_by(
                |(_, a), (_, b)| match sort {
                    ListSort::CreatedAsc => a.cmp(b),
                    ListSort::CreatedDesc => b.cmp(a),
                },
            )?;
        heads[first].next()
    })
}

/// Whether a cold bead, read back, matches the list's filters that a held bead's indexes judge
/// (assignee, labels, type, parent): what [`NamespaceState::key_may_match_list`] cannot judge of
/// a bead in no memory index.
fn cold_bead_matches_list(bead: &Bead, filter: &ListFilter) -> bool {
    filter.assignee.as_ref().is_none_or(|assignee| &bead.assignee == assignee)
        && filter.labels_all.iter().all(|label| bead.labels.contains(label))
        && filter.bead_type.as_ref().is_none_or(|bead_type| &bead.bead_type == bead_type)
        && filter.parent.as_ref().is_none_or(|parent| bead.parent_id.as_ref() == Some(parent))
}

/// Where the beads of one listing are: a memory index's set (held beads) and, for cold beads,
/// a listing on disk ([`crate::state::closed_index`]).
#[derive(Clone, Copy)]
pub(super) struct Source<'a> {
    /// The memory index's set, if it has one.
    pub(super) held: Option<&'a BTreeSet<CreatedKey>>,
    /// The listing on disk of the cold beads, if cold beads can be in it.
    pub(super) cold: Option<Listing<'a>>,
}
