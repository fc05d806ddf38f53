//! `namespace queues NS`: a namespace's work queues (ready work by pool and by assignee, the
//! oldest ready bead, who holds what, leases about to lapse, dead-lettered beads), which the
//! console's namespace page and `strand top` show too.

use serde::{Deserialize, Serialize};

use super::{ReadCommand, RegisteredShape};
use crate::model::{BeadId, Namespace, Timestamp};
use crate::outcome::{LeaseHeld, Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 20 NamespaceQueues);
registered!(answer 1 QueueDetail);

pub use crate::outcome::QueueDetail;

/// Show the queues of the request's namespace, which must exist.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceQueues {
    /// The reader's clock; the node serving the read stamps its own.
    pub now: Timestamp,
    /// Leases that lapse within this many milliseconds count as expiring.
    pub window_ms: u64,
}

impl Default for NamespaceQueues {
    fn default() -> NamespaceQueues {
        NamespaceQueues { now: Timestamp(0), window_ms: QueueDetail::WINDOW_MS_DEFAULT }
    }
}

impl ReadCommand for NamespaceQueues {
    const NAME: &'static str = "namespace_queues";
    const MUST_EXIST: bool = true;

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        Ok(namespace.queues(self.now, self.window_ms).into())
    }
}

impl RegisteredShape for QueueDetail {
    const NAME: &'static str = "queue_detail";

    fn sample() -> QueueDetail {
        QueueDetail {
            now: Timestamp(1_700_000_060_000),
            ready: 2,
            ready_by_pool: vec![("web".into(), 2)],
            ready_by_assignee: vec![(String::new(), 2)],
            oldest_ready: Some((BeadId("st-1".into()), Timestamp(1_700_000_000_000))),
            in_progress_by_assignee: vec![("carol".into(), 1)],
            dead_lettered: 1,
            dead_letter_ids: vec![BeadId("st-4".into())],
            leased: 1,
            expiring: 1,
            window_ms: QueueDetail::WINDOW_MS_DEFAULT,
            leases: vec![LeaseHeld {
                bead_id: BeadId("st-3".into()),
                holder: "carol".into(),
                lease_id: 7,
                expires_at: Timestamp(1_700_000_090_000),
            }],
        }
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use tonic::Status as GrpcStatus;

    use super::{NamespaceQueues, QueueDetail};
    use crate::commands::RegisteredAnswer;
    use crate::convert::{FromAnswer, IntoAnswer, ToReadRequest, read_request, refusal_to_status, unexpected};
    use crate::model::{BeadId, Timestamp};
    use crate::outcome::{Answer, LeaseHeld, Outcome};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::NamespaceQueuesRequest, |request, now| {
        let window_ms = if request.window_ms == 0 { QueueDetail::WINDOW_MS_DEFAULT } else { request.window_ms };
        Ok(NamespaceQueues { now, window_ms }.into())
    });

    impl ToReadRequest for NamespaceQueues {
        /// The node stamps its own clock; the client's is not sent.
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            pb::NamespaceQueuesRequest { header: Some(header), window_ms: self.window_ms }.into()
        }
    }

    fn counts(counts: Vec<(String, u64)>) -> Vec<pb::NamespaceCount> {
        counts.into_iter().map(|(name, count)| pb::NamespaceCount { name, count }).collect()
    }

    fn pairs(counts: Vec<pb::NamespaceCount>) -> Vec<(String, u64)> {
        counts.into_iter().map(|count| (count.name, count.count)).collect()
    }

    impl FromAnswer for pb::NamespaceQueuesResponse {
        fn from_answer(answer: Answer) -> Result<Self, GrpcStatus> {
            match answer.map_err(refusal_to_status)? {
                Outcome::Registered(RegisteredAnswer::QueueDetail(detail)) => {
                    let (oldest_ready_id, oldest_ready_created_ms) =
                        detail.oldest_ready.map_or((String::new(), 0), |(id, created_at)| (id.0, created_at.0));
                    Ok(pb::NamespaceQueuesResponse {
                        now_ms: detail.now.0,
                        ready: detail.ready,
                        ready_by_pool: counts(detail.ready_by_pool),
                        ready_by_assignee: counts(detail.ready_by_assignee),
                        oldest_ready_id,
                        oldest_ready_created_ms,
                        in_progress_by_assignee: counts(detail.in_progress_by_assignee),
                        dead_lettered: detail.dead_lettered,
                        dead_letter_ids: detail.dead_letter_ids.into_iter().map(|id| id.0).collect(),
                        leased: detail.leased,
                        expiring: detail.expiring,
                        window_ms: detail.window_ms,
                        leases: detail
                            .leases
                            .into_iter()
                            .map(|lease| pb::LeaseHeld {
                                bead_id: lease.bead_id.0,
                                holder: lease.holder,
                                lease_id: lease.lease_id,
                                expires_at_ms: lease.expires_at.0,
                            })
                            .collect(),
                    })
                }
                other => Err(unexpected(&other)),
            }
        }
    }

    impl IntoAnswer for pb::NamespaceQueuesResponse {
        fn into_answer(self) -> Answer {
            let oldest_ready = (!self.oldest_ready_id.is_empty())
                .then_some((BeadId(self.oldest_ready_id), Timestamp(self.oldest_ready_created_ms)));
            Ok(QueueDetail {
                now: Timestamp(self.now_ms),
                ready: self.ready,
                ready_by_pool: pairs(self.ready_by_pool),
                ready_by_assignee: pairs(self.ready_by_assignee),
                oldest_ready,
                in_progress_by_assignee: pairs(self.in_progress_by_assignee),
                dead_lettered: self.dead_lettered,
                dead_letter_ids: self.dead_letter_ids.into_iter().map(BeadId).collect(),
                leased: self.leased,
                expiring: self.expiring,
                window_ms: self.window_ms,
                leases: self
                    .leases
                    .into_iter()
                    .map(|lease| LeaseHeld {
                        bead_id: BeadId(lease.bead_id),
                        holder: lease.holder,
                        lease_id: lease.lease_id,
                        expires_at: Timestamp(lease.expires_at_ms),
                    })
                    .collect(),
            }
            .into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{Command, CreateBead, Query};
    use crate::commands::RegisteredAnswer;
    use crate::convert::{FromAnswer, IntoAnswer};
    use crate::model::{Actor, LABEL_DEAD_LETTER, Status};
    use crate::outcome::Answer;
    use crate::proto as pb;
    use crate::registry::ClientRpc;
    use crate::state::tests::Harness;

    fn queues(answer: Answer) -> QueueDetail {
        match answer {
            Ok(Outcome::Registered(RegisteredAnswer::QueueDetail(detail))) => detail,
            other => panic!("expected a namespace's queues, got {other:?}"),
        }
    }

    fn labelled(title: &str, labels: &[&str]) -> CreateBead {
        CreateBead {
            title: title.into(),
            labels: labels.iter().map(|label| label.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn queues_count_ready_work_by_pool_and_assignee_and_leases_by_expiry() {
        let mut harness = Harness::new();
        let oldest = harness.create_with(labelled("first web", &["pool:web"]));
        harness.create_with(labelled("second web", &["pool:web"]));
        harness.create_with(labelled("api", &["pool:api"]));
        harness.create_with(CreateBead { title: "for bob".into(), assignee: "bob".into(), ..Default::default() });
        harness.create_with(CreateBead {
            title: "later".into(),
            defer_until: Some(Timestamp(i64::MAX)),
            ..Default::default()
        });
        let soon = harness.create("soon");
        let late = harness.create("late");
        let held = harness.create("held without lease");
        let lease = |id: &BeadId, actor: &str, lease_ms: u64| {
            Command::Claim(crate::command::Claim {
                id: id.clone(),
                actor: Actor(actor.into()),
                lease_ms: Some(lease_ms),
            })
        };
        harness.apply(lease(&soon, "carol", 30_000)).unwrap();
        harness.apply(lease(&late, "carol", 600_000)).unwrap();
        harness.claim(&held, "dave").unwrap();

        let now = Timestamp(harness.now);
        let shown = queues(harness.query(NamespaceQueues { now, window_ms: 60_000 }.into()));
        assert_eq!(shown.ready, 4, "the deferred bead is not ready: {shown:?}");
        assert_eq!(shown.ready_by_pool, vec![("web".into(), 2), (String::new(), 1), ("api".into(), 1)]);
        assert_eq!(shown.ready_by_assignee, vec![(String::new(), 3), ("bob".into(), 1)]);
        assert_eq!(shown.oldest_ready.map(|(id, _)| id), Some(oldest));
        assert_eq!(shown.in_progress_by_assignee, vec![("carol".into(), 2), ("dave".into(), 1)]);
        assert_eq!((shown.leased, shown.expiring, shown.window_ms), (2, 1, 60_000));
        let order: Vec<&BeadId> = shown.leases.iter().map(|lease| &lease.bead_id).collect();
        assert_eq!(order, vec![&soon, &late], "soonest to lapse first");
        assert_eq!(shown.leases[0].holder, "carol");
        // A wider window counts both.
        let wide = queues(harness.query(NamespaceQueues { now, window_ms: 3_600_000 }.into()));
        assert_eq!(wide.expiring, 2);
        assert_eq!(shown.dead_lettered, 0);
    }

    #[test]
    fn queues_list_dead_lettered_beads_until_they_close() {
        let mut harness = Harness::new();
        let dead = harness.create_with(CreateBead {
            title: "poison".into(),
            labels: [LABEL_DEAD_LETTER.to_string()].into(),
            requested_status: Some(Status::Blocked),
            ..Default::default()
        });
        let shown = queues(harness.query(NamespaceQueues::default().into()));
        assert_eq!((shown.dead_lettered, shown.dead_letter_ids.clone()), (1, vec![dead.clone()]));
        harness.close(&dead).unwrap();
        let shown = queues(harness.query(NamespaceQueues::default().into()));
        assert_eq!((shown.dead_lettered, shown.ready), (0, 0));
    }

    #[test]
    fn queues_need_their_namespace() {
        let mut harness = Harness::new();
        harness.create("one");
        let read: Query = NamespaceQueues::default().into();
        let refused = harness.state.query_as(None, &Namespace("rgi".into()), false, &read).unwrap_err();
        assert!(matches!(refused, Refusal::NamespaceNotFound { .. }), "{refused:?}");
    }

    #[test]
    fn queues_convert_to_their_request_and_their_answer_back() {
        let query: Query = NamespaceQueues { now: Timestamp(0), window_ms: 5_000 }.into();
        let header = pb::ReadHeader { namespace: "rig".into(), ..Default::default() };
        let ClientRpc::NamespaceQueues(request) = crate::convert::read_to_proto(header, &query) else {
            panic!("a queues read is sent as a NamespaceQueues request")
        };
        let read = crate::convert::IntoRead::into_read(request, Timestamp(0)).unwrap();
        assert_eq!((read.query, read.namespace.0.as_str()), (query, "rig"));
        let answer: Answer = Ok(QueueDetail::sample().into());
        let response = pb::NamespaceQueuesResponse::from_answer(answer.clone()).unwrap();
        assert_eq!(response.into_answer(), answer);
    }
}
