//! `lease release ID`: the holder of a leased claim gives it up; the bead goes back to `open`,
//! unassigned.

use serde::{Deserialize, Serialize};

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::model::BeadId;
use crate::outcome::Answer;
use crate::state::NamespaceState;

registered!(write 5 LeaseRelease);

/// Give up the proposal's actor's leased claim: the bead goes back to `open`, unassigned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRelease {
    /// The bead.
    pub id: BeadId,
    /// The lease it must still be (`None`: whichever lease the actor holds).
    pub lease_id: Option<u64>,
}

impl WriteCommand for LeaseRelease {
    const NAME: &'static str = "lease_release";
    const ROLE: Role = Role::Agent;

    fn samples() -> Vec<LeaseRelease> {
        vec![LeaseRelease { id: super::samples::bead_id(1), lease_id: Some(41) }]
    }
}

impl NamespaceWrite for LeaseRelease {
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        namespace.lease_release(&self.id, context.actor, self.lease_id, context.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::LeaseRelease;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::model::BeadId;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::LeaseReleaseRequest, |request| {
        Ok(LeaseRelease { id: BeadId(request.id), lease_id: request.lease_id }.into())
    });

    impl ToWriteRequest for LeaseRelease {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let request =
                pb::LeaseReleaseRequest { header: Some(header), id: self.id.0.clone(), lease_id: self.lease_id };
            Some(request.into())
        }
    }
}
