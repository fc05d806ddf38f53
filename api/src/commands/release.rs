//! `release`: the holder of a plain (unleased) claim gives the bead back, open and unassigned.
//! Anyone else is refused, with the holder named; a leased claim is given back with
//! `lease release`, which checks the lease.

use serde::{Deserialize, Serialize};

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::model::{BeadId, Status};
use crate::outcome::{Answer, Outcome, Refusal};
use crate::printable::printable;
use crate::state::NamespaceState;

registered!(write 36 Release);

/// Give back the proposal's actor's plain claim on a bead.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Release {
    /// The bead.
    pub id: BeadId,
}

impl WriteCommand for Release {
    const NAME: &'static str = "release";
    const ROLE: Role = Role::Agent;

    fn samples() -> Vec<Release> {
        vec![Release { id: super::samples::bead_id(1) }]
    }
}

impl NamespaceWrite for Release {
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        let (actor, now) = (context.actor, context.now);
        let bead = namespace.bead(&self.id)?;
        let claimed = bead.status == Status::InProgress && !bead.assignee.is_empty();
        if !claimed || bead.assignee != actor.0 {
            return Err(Refusal::NotHolder {
                id: self.id.clone(),
                holder: if claimed { bead.assignee.clone() } else { String::new() },
                actor: actor.0.clone(),
                status: bead.status,
            });
        }
        if let Some(lease) = &bead.lease {
            let id = printable(self.id.as_str());
            return Err(Refusal::Invalid(format!(
                "bead {id} is held under lease {}; give it back with `strand lease release {id}`",
                lease.id
            )));
        }
        // The change is recorded as the bead's `bead.updated` event.
        let bead = namespace.modify_and_read(&self.id, now, |bead| {
            bead.status = Status::Open;
            bead.assignee.clear();
        })?;
        Ok(Outcome::Bead(Box::new(bead)))
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::Release;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::model::BeadId;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::ReleaseRequest, |request| Ok(Release { id: BeadId(request.id) }.into()));

    impl ToWriteRequest for Release {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            Some(pb::ReleaseRequest { header: Some(header), id: self.id.0.clone() }.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;
    use crate::model::Actor;
    use crate::proto as pb;
    use crate::registry::ClientRpc;
    use crate::state::tests::{Harness, bead_of};

    fn release(harness: &mut Harness, id: &BeadId, actor: &str) -> crate::outcome::Answer {
        harness.actor = Actor(actor.into());
        harness.apply(Release { id: id.clone() }.into())
    }

    #[test]
    fn the_holder_of_a_plain_claim_releases_it_and_anyone_else_is_refused_naming_the_holder() {
        let mut harness = Harness::new();
        let id = harness.create("parser");
        bead_of(harness.claim(&id, "carol"));
        let claimed = harness.get(&id);

        let refused = release(&mut harness, &id, "dave").unwrap_err();
        assert!(matches!(&refused, Refusal::NotHolder { holder, .. } if holder == "carol"), "{refused:?}");
        assert!(refused.to_string().contains("claimed by carol, not by dave"), "{refused}");
        assert_eq!(harness.get(&id), claimed, "a refused release changes nothing");

        let released = bead_of(release(&mut harness, &id, "carol"));
        assert_eq!((released.status, released.assignee.as_str()), (Status::Open, ""));
        assert_eq!(harness.get(&id), released);

        let again = release(&mut harness, &id, "carol").unwrap_err();
        assert!(again.to_string().contains("is not claimed (status open)"), "{again}");
        let missing = release(&mut harness, &BeadId("st-99".into()), "carol").unwrap_err();
        assert!(matches!(missing, Refusal::NotFound(_)), "{missing:?}");
    }

    #[test]
    fn a_leased_claim_is_given_back_with_lease_release_not_release() {
        let mut harness = Harness::new();
        let id = harness.create("parser");
        let command = Command::Claim(crate::command::Claim {
            id: id.clone(),
            actor: Actor("carol".into()),
            lease_ms: Some(60_000),
        });
        bead_of(harness.apply(command));
        let leased = harness.get(&id);
        let refused = release(&mut harness, &id, "carol").unwrap_err();
        assert!(refused.to_string().contains("strand lease release st-1"), "{refused}");
        assert_eq!(harness.get(&id), leased, "a refused release changes nothing");
    }

    #[test]
    fn a_release_converts_to_its_request_and_back() {
        let command: Command = Release { id: BeadId("st-1".into()) }.into();
        let header = pb::WriteHeader { namespace: "rig".into(), actor: "carol".into(), ..Default::default() };
        let Some(ClientRpc::Release(request)) = crate::convert::write_to_proto(header, &command) else {
            panic!("a release is sent as a Release request")
        };
        let write = crate::convert::IntoWrite::into_write(request).unwrap();
        assert_eq!((write.command, write.namespace.0.as_str()), (command, "rig"));
    }
}
