//! The queue figures of one namespace ([`QueueDetail`]): one walk of the ready index, one of the
//! leased beads, and look-ups of the `working` and `dead-letter` indexes; no scan of the store.

use std::collections::HashMap;

use super::NamespaceState;
use crate::model::{LABEL_DEAD_LETTER, Status, Timestamp, routed_pool};
use crate::outcome::{LeaseHeld, QueueDetail};

/// Counts as `(name, count)`, most first, ties by name.
fn ranked(counts: HashMap<String, u64>) -> Vec<(String, u64)> {
    let mut counts: Vec<(String, u64)> = counts.into_iter().collect();
    counts.sort_by(|(a_name, a), (b_name, b)| b.cmp(a).then_with(|| a_name.cmp(b_name)));
    counts
}

impl NamespaceState {
    /// Its queues at `now`, with leases that lapse within `window_ms` counted as expiring.
    pub fn queues(&self, now: Timestamp, window_ms: u64) -> QueueDetail {
        let (mut ready, mut by_pool, mut by_assignee) = (0, HashMap::new(), HashMap::new());
        let mut oldest_ready = None;
        for key in &self.indexes.ready.all {
            let Some(bead) = self.beads.get(&key.created.id) else { continue };
            if bead.defer_until.is_some_and(|until| until > now) {
                continue;
            }
            ready += 1;
            *by_pool.entry(routed_pool(&bead).unwrap_or_default().to_string()).or_insert(0) += 1;
            *by_assignee.entry(bead.assignee.clone()).or_insert(0) += 1;
            if oldest_ready.as_ref().is_none_or(|(_, created_at)| (bead.created_at, bead.seq) < *created_at) {
                oldest_ready = Some((bead.id.clone(), (bead.created_at, bead.seq)));
            }
        }
        let in_progress_by_assignee =
            self.indexes.working.iter().map(|(assignee, beads)| (assignee.clone(), beads.len() as u64)).collect();
        let dead: Vec<_> = (self.indexes.by_label.get(LABEL_DEAD_LETTER).into_iter().flatten())
            .filter(|key| self.beads.get(&key.id).is_some_and(|bead| bead.status != Status::Closed))
            .collect();
        let mut leases: Vec<LeaseHeld> = self
            .indexes
            .leased
            .iter()
            .filter_map(|id| {
                let bead = self.beads.get(id)?;
                let lease = bead.lease.as_ref()?;
                Some(LeaseHeld {
                    bead_id: id.clone(),
                    holder: lease.holder.clone(),
                    lease_id: lease.id,
                    expires_at: lease.expires_at,
                })
            })
            .collect();
        leases.sort_by(|a, b| a.expires_at.cmp(&b.expires_at).then_with(|| a.bead_id.cmp(&b.bead_id)));
        let horizon = now.0.saturating_add(i64::try_from(window_ms).unwrap_or(i64::MAX));
        let expiring = leases.iter().filter(|lease| lease.expires_at.0 <= horizon).count() as u64;
        let leased = leases.len() as u64;
        leases.truncate(QueueDetail::ROWS_MAX);
        QueueDetail {
            now,
            ready,
            ready_by_pool: ranked(by_pool),
            ready_by_assignee: ranked(by_assignee),
            oldest_ready: oldest_ready.map(|(id, (created_at, _))| (id, created_at)),
            in_progress_by_assignee: ranked(in_progress_by_assignee),
            dead_lettered: dead.len() as u64,
            dead_letter_ids: dead.iter().take(QueueDetail::ROWS_MAX).map(|key| (*key.id).clone()).collect(),
            leased,
            expiring,
            window_ms,
            leases,
        }
    }
}
