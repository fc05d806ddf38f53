//! Numbering of a client's mutating requests for exactly-once retries (see `state::session`).

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::command::RequestId;

/// Hands out request numbers and tracks which are still waiting for an answer.
#[derive(Debug)]
pub struct RequestIds {
    client_id: u64,
    next_request_seq: AtomicU64,
    unacked: Mutex<BTreeSet<u64>>,
}

impl RequestIds {
    /// Numbering for one client id (non-zero; 0 means "no id" on the wire).
    pub fn new(client_id: u64) -> RequestIds {
        assert_ne!(client_id, 0, "client id 0 is reserved for requests without an id");
        RequestIds { client_id, next_request_seq: AtomicU64::new(1), unacked: Mutex::new(BTreeSet::new()) }
    }

    /// The client id.
    pub fn client_id(&self) -> u64 {
        self.client_id
    }

    /// The identity of a new request; call [`RequestIds::finish`] once its answer is in.
    pub fn begin(&self) -> RequestId {
        let request_seq = self.next_request_seq.fetch_add(1, Ordering::Relaxed);
        let mut unacked = self.unacked.lock().expect("unacked set lock");
        unacked.insert(request_seq);
        let lowest_unacked = *unacked.first().expect("just inserted");
        RequestId { client_id: self.client_id, request_seq, lowest_unacked }
    }

    /// Marks a request answered (or abandoned), so the cluster may forget its answer.
    pub fn finish(&self, request_id: &RequestId) {
        self.unacked.lock().expect("unacked set lock").remove(&request_id.request_seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_unacked_follows_outstanding_requests() {
        let ids = RequestIds::new(5);
        let first = ids.begin();
        let second = ids.begin();
        assert_eq!((first.request_seq, second.request_seq, second.lowest_unacked), (1, 2, 1));
        ids.finish(&first);
        assert_eq!(ids.begin().lowest_unacked, 2);
    }
}
