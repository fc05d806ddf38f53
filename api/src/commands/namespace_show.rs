//! `namespace show NS`: a namespace's settings (prefix, lease settings), its counts (beads by
//! status, ready and leased beads, formulas and orders) and its newest event.

use serde::{Deserialize, Serialize};

use super::{ReadCommand, RegisteredShape};
use crate::model::{Namespace, Status, Timestamp};
use crate::outcome::{NamespaceInfo, Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 0 NamespaceShow);
registered!(answer 0 NamespaceDetail);

pub use crate::outcome::NamespaceDetail;

/// Show the settings and counts of the request's namespace, which must exist.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceShow {
    /// The reader's clock, for the count of ready beads (deferred ones are not ready yet); the
    /// node serving the read stamps its own.
    pub now: Timestamp,
}

impl ReadCommand for NamespaceShow {
    const NAME: &'static str = "namespace_show";
    const MUST_EXIST: bool = true;

    fn read(&self, name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        let mut counts: Vec<(String, u64)> = Status::ALL
            .into_iter()
            .map(|status| (status.as_str().to_string(), namespace.count_with_status(status) as u64))
            .collect();
        counts.push(("ready".into(), namespace.ready_count(self.now) as u64));
        counts.push(("leased".into(), namespace.lease_count() as u64));
        counts.push(("formulas".into(), namespace.formula_count() as u64));
        counts.push(("orders".into(), namespace.order_count() as u64));
        Ok(NamespaceDetail { info: namespace.info(name), counts }.into())
    }
}

impl RegisteredShape for NamespaceDetail {
    const NAME: &'static str = "namespace_detail";

    fn sample() -> NamespaceDetail {
        NamespaceDetail {
            info: NamespaceInfo {
                name: "default".into(),
                prefix: "st".into(),
                beads: 3,
                last_event_seq: 7,
                default_lease_ms: Some(60_000),
                max_deliveries: 5,
            },
            counts: vec![("open".into(), 2), ("closed".into(), 1)],
        }
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use tonic::Status as GrpcStatus;

    use super::{NamespaceDetail, NamespaceShow};
    use crate::commands::RegisteredAnswer;
    use crate::convert::{FromAnswer, IntoAnswer, ToReadRequest, read_request, refusal_to_status, unexpected};
    use crate::outcome::{Answer, NamespaceInfo, Outcome, Refusal};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::NamespaceShowRequest, |_request, now| Ok(NamespaceShow { now }.into()));

    impl ToReadRequest for NamespaceShow {
        /// The node stamps its own clock; the client's is not sent.
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            pb::NamespaceShowRequest { header: Some(header) }.into()
        }
    }

    impl FromAnswer for pb::NamespaceShowResponse {
        fn from_answer(answer: Answer) -> Result<Self, GrpcStatus> {
            match answer.map_err(refusal_to_status)? {
                Outcome::Registered(RegisteredAnswer::NamespaceDetail(detail)) => Ok(pb::NamespaceShowResponse {
                    namespace: Some(pb::NamespaceInfo::from(&detail.info)),
                    counts: detail.counts.into_iter().map(|(name, count)| pb::NamespaceCount { name, count }).collect(),
                }),
                other => Err(unexpected(&other)),
            }
        }
    }

    impl IntoAnswer for pb::NamespaceShowResponse {
        fn into_answer(self) -> Answer {
            let info = self.namespace.map(NamespaceInfo::from).ok_or_else(|| {
                Refusal::Invalid("the cluster answered a namespace show without its namespace; upgrade the node".into())
            })?;
            let counts = self.counts.into_iter().map(|count| (count.name, count.count)).collect();
            Ok(NamespaceDetail { info, counts }.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{Command, CreateBead, Query};
    use crate::commands::RegisteredAnswer;
    use crate::convert::{FromAnswer, IntoAnswer};
    use crate::model::Actor;
    use crate::outcome::Answer;
    use crate::proto as pb;
    use crate::registry::ClientRpc;
    use crate::state::tests::Harness;

    fn detail(answer: Answer) -> NamespaceDetail {
        match answer {
            Ok(Outcome::Registered(RegisteredAnswer::NamespaceDetail(detail))) => detail,
            other => panic!("expected a namespace's detail, got {other:?}"),
        }
    }

    #[test]
    fn a_namespace_shows_its_settings_and_counts() {
        let mut harness = Harness::new();
        let first = harness.create("one");
        harness.create("two");
        let third = harness.create("three");
        harness.create_with(CreateBead {
            title: "later".into(),
            defer_until: Some(Timestamp(i64::MAX)),
            ..Default::default()
        });
        harness.create_with(CreateBead { title: "wisp".into(), ephemeral: true, ..Default::default() });
        harness.claim(&first, "carol").unwrap();
        let claim = Command::Claim(crate::command::Claim {
            id: third.clone(),
            actor: Actor("dave".into()),
            lease_ms: Some(60_000),
        });
        harness.apply(claim).unwrap();
        let configure = Command::NamespaceConfigure(crate::command::NamespaceConfigure {
            default_lease_ms: Some(Some(600_000)),
            max_deliveries: Some(4),
        });
        harness.apply(configure).unwrap();

        let shown = detail(harness.query(NamespaceShow { now: Timestamp(harness.now) }.into()));
        assert_eq!((shown.info.name.as_str(), shown.info.prefix.as_str(), shown.info.beads), ("default", "st", 5));
        assert_eq!((shown.info.default_lease_ms, shown.info.max_deliveries), (Some(600_000), 4));
        let count = |name: &str| shown.counts.iter().find(|(counted, _)| counted == name).map(|(_, count)| *count);
        assert_eq!(
            (count("open"), count("in_progress"), count("closed"), count("leased")),
            (Some(3), Some(2), Some(0), Some(1))
        );
        // What `ready` lists: not the deferred bead, not the wisp.
        assert_eq!(count("ready"), Some(harness.ready_all().len() as u64));
        assert_eq!(count("ready"), Some(1));
        assert_eq!(shown.counts.len(), Status::ALL.len() + 4, "every status, zeros included, then four counts");
    }

    #[test]
    fn a_namespace_show_needs_its_namespace() {
        let mut harness = Harness::new();
        harness.create("one");
        let show: Query = NamespaceShow::default().into();
        let missing = Namespace("rgi".into());
        let refused = harness.state.query_as(None, &missing, false, &show).unwrap_err();
        assert!(matches!(refused, Refusal::NamespaceNotFound { .. }), "{refused:?}");
        assert!(harness.state.query_as(None, &harness.namespace, false, &show).is_ok());
    }

    #[test]
    fn a_namespace_show_converts_to_its_request_and_its_answer_back() {
        let query: Query = NamespaceShow::default().into();
        let header = pb::ReadHeader { namespace: "rig".into(), ..Default::default() };
        let ClientRpc::NamespaceShow(request) = crate::convert::read_to_proto(header, &query) else {
            panic!("a namespace show is sent as a NamespaceShow request")
        };
        let read = crate::convert::IntoRead::into_read(request, crate::model::Timestamp(0)).unwrap();
        assert_eq!((read.query, read.namespace.0.as_str()), (query, "rig"));
        let answer: Answer = Ok(NamespaceDetail::sample().into());
        let response = pb::NamespaceShowResponse::from_answer(answer.clone()).unwrap();
        assert_eq!(response.into_answer(), answer);
    }
}
