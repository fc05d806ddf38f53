//! `lease renew ID`: the holder of a leased claim renews it for its lease's length again.

use serde::{Deserialize, Serialize};

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::model::BeadId;
use crate::outcome::Answer;
use crate::state::NamespaceState;

registered!(write 4 LeaseRenew);

/// Renew the proposal's actor's lease on a bead, for its lease's length again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRenew {
    /// The bead.
    pub id: BeadId,
    /// The lease it must still be (`None`: whichever lease the actor holds).
    pub lease_id: Option<u64>,
}

impl WriteCommand for LeaseRenew {
    const NAME: &'static str = "lease_renew";
    const ROLE: Role = Role::Agent;

    fn samples() -> Vec<LeaseRenew> {
        vec![LeaseRenew { id: super::samples::bead_id(1), lease_id: Some(41) }]
    }
}

impl NamespaceWrite for LeaseRenew {
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        namespace.lease_renew(&self.id, context.actor, self.lease_id, context.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::LeaseRenew;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::model::BeadId;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::LeaseRenewRequest, |request| {
        Ok(LeaseRenew { id: BeadId(request.id), lease_id: request.lease_id }.into())
    });

    impl ToWriteRequest for LeaseRenew {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            Some(pb::LeaseRenewRequest { header: Some(header), id: self.id.0.clone(), lease_id: self.lease_id }.into())
        }
    }
}
