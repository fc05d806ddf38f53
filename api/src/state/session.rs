//! The dedup table that makes client retries exactly-once.
//!
//! Each client (a random `client_id`) has a session holding the answers to its recent requests.
//! A request whose answer is in the session gets that answer again and is not applied twice, on
//! any node and after any leader change, because the table is part of the replicated state.
//!
//! Eviction, all of it deterministic (driven by leader-stamped time and counts):
//! - answers below the client's `lowest_unacked` are dropped (the client has them);
//! - a session keeps at most [`SESSION_RESPONSES_MAX`] answers, oldest dropped first; a retry of
//!   a dropped one is refused with `RequestTooOld`, never applied again;
//! - a session idle for [`SESSION_IDLE_MS_MAX`] is dropped, and past [`SESSIONS_MAX`] sessions
//!   the least recently active goes, but never one active within [`SESSION_RETRY_WINDOW_MS`]:
//!   the table grows past the cap instead, by the clients that wrote in that window, up to
//!   [`SESSIONS_HARD_MAX`], past which the least recently active goes whatever its age.
//! - A client that had answers and returns to find its session gone gets `SessionExpired` rather
//!   than a second application. A client whose session is gone and who retries its *first*
//!   request (nothing marks it as a retry) is applied as new: that takes a retry later than the
//!   window after the client's last write, more clients than the hard cap writing within the
//!   window, or a leader clock jump past the idle limit.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::input::RequestId;
use crate::limits::{
    SESSION_IDLE_MS_MAX, SESSION_RESPONSES_MAX, SESSION_RETRY_WINDOW_MS, SESSIONS_HARD_MAX, SESSIONS_MAX,
};
use crate::model::Timestamp;
use crate::outcome::{Answer, Refusal};

/// One client's recent answers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// Answers by request number.
    pub answers: BTreeMap<u64, Answer>,
    /// Requests below this number are forgotten.
    pub floor: u64,
    /// When the client last sent a request (leader time).
    pub last_active: Timestamp,
}

/// What the table says about an incoming request.
pub enum Seen {
    /// Not seen: apply it.
    New,
    /// Seen: answer with this.
    Answered(Answer),
}

/// All client sessions.
#[derive(Clone, Debug, Default)]
pub struct Sessions {
    pub(super) by_client: BTreeMap<u64, Session>,
    by_activity: BTreeSet<(Timestamp, u64)>,
    pub(super) dirty: BTreeSet<u64>,
}

impl Sessions {
    /// Loads one persisted session.
    pub(super) fn load(&mut self, client_id: u64, session: Session) {
        self.by_activity.insert((session.last_active, client_id));
        self.by_client.insert(client_id, session);
    }

    /// Looks a request up.
    pub(super) fn check(&self, request_id: &RequestId) -> Seen {
        let RequestId { client_id, request_seq, lowest_unacked } = *request_id;
        let Some(session) = self.by_client.get(&client_id) else {
            if lowest_unacked > 1 {
                return Seen::Answered(Err(Refusal::SessionExpired { client_id, request_seq }));
            }
            return Seen::New;
        };
        if let Some(answer) = session.answers.get(&request_seq) {
            return Seen::Answered(answer.clone());
        }
        if request_seq < session.floor {
            return Seen::Answered(Err(Refusal::RequestTooOld { client_id, request_seq }));
        }
        Seen::New
    }

    /// Records the answer to a request that was just applied.
    pub(super) fn record(&mut self, request_id: &RequestId, now: Timestamp, answer: &Answer) {
        let client_id = request_id.client_id;
        let session = self.by_client.entry(client_id).or_default();
        self.by_activity.remove(&(session.last_active, client_id));
        session.last_active = now;
        self.by_activity.insert((now, client_id));
        session.floor = session.floor.max(request_id.lowest_unacked);
        let floor = session.floor;
        session.answers.retain(|request_seq, _| *request_seq >= floor);
        session.answers.insert(request_id.request_seq, answer.clone());
        while session.answers.len() > SESSION_RESPONSES_MAX {
            let (oldest, _) = session.answers.pop_first().expect("a session over its limit has answers");
            session.floor = session.floor.max(oldest + 1);
        }
        self.dirty.insert(client_id);
    }

    /// Drops idle sessions and, past the cap, the least recently active ones outside the retry
    /// window.
    pub(super) fn evict(&mut self, now: Timestamp) {
        while let Some(&(last_active, client_id)) = self.by_activity.first() {
            let idle_ms = now.0.saturating_sub(last_active.0);
            let expired = idle_ms > SESSION_IDLE_MS_MAX;
            let sessions = self.by_client.len();
            let over_cap =
                sessions > SESSIONS_HARD_MAX || (sessions > SESSIONS_MAX && idle_ms > SESSION_RETRY_WINDOW_MS);
            if !expired && !over_cap {
                break;
            }
            self.by_activity.pop_first();
            self.by_client.remove(&client_id);
            self.dirty.insert(client_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Outcome;

    fn first_request(client_id: u64) -> RequestId {
        RequestId { client_id, request_seq: 1, lowest_unacked: 1 }
    }

    #[test]
    fn the_cap_never_evicts_a_session_inside_the_retry_window() {
        let mut sessions = Sessions::default();
        let start = Timestamp(1_000);
        let clients = SESSIONS_MAX as u64 + 100;
        for client_id in 1..=clients {
            sessions.evict(start);
            sessions.record(&first_request(client_id), start, &Ok(Outcome::Done));
        }
        assert_eq!(sessions.by_client.len(), clients as usize, "no session of the window was evicted");
        let window_end = Timestamp(start.0 + SESSION_RETRY_WINDOW_MS);
        sessions.evict(window_end);
        let retry = sessions.check(&first_request(1));
        assert!(matches!(retry, Seen::Answered(Ok(Outcome::Done))), "a first request retried in the window is a retry");
        // Past the window the cap holds again, least recently active first.
        sessions.evict(Timestamp(window_end.0 + 1));
        assert_eq!(sessions.by_client.len(), SESSIONS_MAX);
        assert!(sessions.by_client.contains_key(&clients) && !sessions.by_client.contains_key(&1));
        assert_eq!(sessions.dirty.len(), clients as usize, "evicted sessions are removed from disk too");
    }

    #[test]
    fn past_the_hard_cap_even_sessions_inside_the_window_go() {
        let mut sessions = Sessions::default();
        let now = Timestamp(1_000);
        for client_id in 1..=(SESSIONS_HARD_MAX as u64 + 1) {
            sessions.evict(now);
            sessions.record(&first_request(client_id), now, &Ok(Outcome::Done));
        }
        sessions.evict(now);
        assert_eq!(sessions.by_client.len(), SESSIONS_HARD_MAX);
        assert!(!sessions.by_client.contains_key(&1), "the least recently active went first");
    }
}
