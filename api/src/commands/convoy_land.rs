//! `convoy land ID`: force-close a convoy, whatever its children's state.

use serde::{Deserialize, Serialize};

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::limits::REASON_BYTES_MAX;
use crate::model::BeadId;
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;

registered!(write 29 ConvoyLand);

/// Force-close a convoy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConvoyLand {
    /// The convoy.
    pub id: BeadId,
    /// Why.
    pub reason: Option<String>,
}

impl WriteCommand for ConvoyLand {
    const NAME: &'static str = "convoy_land";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        let reason = self.reason.as_ref();
        reason.map_or(Ok(()), |reason| crate::validate::check_size("reason", reason, REASON_BYTES_MAX))
    }

    fn samples() -> Vec<ConvoyLand> {
        vec![ConvoyLand { id: super::samples::bead_id(6), reason: Some("landed by hand".into()) }]
    }
}

impl NamespaceWrite for ConvoyLand {
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        namespace.convoy_land(&self.id, &self.reason, context.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::ConvoyLand;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::model::BeadId;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::ConvoyLandRequest, |request| {
        Ok(ConvoyLand { id: BeadId(request.id), reason: request.reason }.into())
    });

    impl ToWriteRequest for ConvoyLand {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let (id, reason) = (self.id.0.clone(), self.reason.clone());
            Some(pb::ConvoyLandRequest { header: Some(header), id, reason }.into())
        }
    }
}
