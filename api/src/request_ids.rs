//! Numbering of a client's mutating requests for exactly-once retries (see `state::session`).

use std::collections::BTreeSet;
use std::sync::Mutex;

use crate::command::RequestId;

#[derive(Debug)]
struct Numbering {
    client_id: u64,
    next_request_seq: u64,
    unacked: BTreeSet<u64>,
}

/// Hands out request numbers and tracks which are still waiting for an answer.
#[derive(Debug)]
pub struct RequestIds {
    numbering: Mutex<Numbering>,
}

impl RequestIds {
    /// Numbering for one client id (non-zero; 0 means "no id" on the wire).
    pub fn new(client_id: u64) -> RequestIds {
        assert_ne!(client_id, 0, "client id 0 is reserved for requests without an id");
        RequestIds { numbering: Mutex::new(Numbering { client_id, next_request_seq: 1, unacked: BTreeSet::new() }) }
    }

    /// The current client id.
    pub fn client_id(&self) -> u64 {
        self.numbering.lock().expect("numbering lock").client_id
    }

    /// The identity of a new request; call [`RequestIds::finish`] once its answer is in.
    pub fn begin(&self) -> RequestId {
        let mut numbering = self.numbering.lock().expect("numbering lock");
        let request_seq = numbering.next_request_seq;
        numbering.next_request_seq += 1;
        numbering.unacked.insert(request_seq);
        let lowest_unacked = *numbering.unacked.first().expect("just inserted");
        RequestId { client_id: numbering.client_id, request_seq, lowest_unacked }
    }

    /// Marks a request answered (or abandoned), so the cluster may forget its answer.
    pub fn finish(&self, request_id: &RequestId) {
        let mut numbering = self.numbering.lock().expect("numbering lock");
        if numbering.client_id == request_id.client_id {
            numbering.unacked.remove(&request_id.request_seq);
        }
    }

    /// Starts over under a new client id, after the cluster reported the session of the current
    /// one expired (every later request of the old id would be refused).
    pub fn renew(&self, expired: &RequestId, new_client_id: u64) {
        assert_ne!(new_client_id, 0, "client id 0 is reserved");
        let mut numbering = self.numbering.lock().expect("numbering lock");
        if numbering.client_id == expired.client_id {
            *numbering = Numbering { client_id: new_client_id, next_request_seq: 1, unacked: BTreeSet::new() };
        }
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

    #[test]
    fn renew_starts_a_new_session() {
        let ids = RequestIds::new(5);
        let expired = ids.begin();
        ids.renew(&expired, 9);
        let next = ids.begin();
        assert_eq!((next.client_id, next.request_seq, next.lowest_unacked), (9, 1, 1));
        ids.finish(&expired);
        assert_eq!(ids.begin().lowest_unacked, 1, "finishing an old-session request touches nothing");
    }
}
