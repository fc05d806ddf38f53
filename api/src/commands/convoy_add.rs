//! `convoy add ID CHILD...`: add beads to a convoy.

use serde::{Deserialize, Serialize};

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::model::BeadId;
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;

registered!(write 28 ConvoyAdd);

/// Add beads to a convoy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConvoyAdd {
    /// The convoy.
    pub id: BeadId,
    /// The beads.
    pub children: Vec<BeadId>,
}

impl WriteCommand for ConvoyAdd {
    const NAME: &'static str = "convoy_add";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        crate::validate::check_routed(self.children.len())
    }

    fn samples() -> Vec<ConvoyAdd> {
        vec![ConvoyAdd { id: super::samples::bead_id(6), children: vec![super::samples::bead_id(3)] }]
    }
}

impl NamespaceWrite for ConvoyAdd {
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        namespace.convoy_add(&self.id, &self.children, context.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::ConvoyAdd;
    use crate::convert::{ToWriteRequest, ids_of, ids_to_proto, write_request};
    use crate::model::BeadId;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::ConvoyAddRequest, |request| {
        Ok(ConvoyAdd { id: BeadId(request.id), children: ids_of(request.children) }.into())
    });

    impl ToWriteRequest for ConvoyAdd {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let (id, children) = (self.id.0.clone(), ids_to_proto(self.children.clone()));
            Some(pb::ConvoyAddRequest { header: Some(header), id, children }.into())
        }
    }
}
