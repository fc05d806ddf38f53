//! `close ID...`: close beads; closing a closed bead succeeds and changes nothing.

use serde::{Deserialize, Serialize};

use super::txn::References;
use super::{BeadWriteCommand, WriteCommand};
use crate::auth::Role;
use crate::limits::{IDS_PER_REQUEST_MAX, REASON_BYTES_MAX};
use crate::model::{BeadId, Timestamp};
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;

registered!(bead_write 8 Close);

/// Close beads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Close {
    /// The beads, at most [`crate::limits::IDS_PER_REQUEST_MAX`].
    pub ids: Vec<BeadId>,
    /// Why, recorded on each bead.
    pub reason: Option<String>,
}

impl WriteCommand for Close {
    const NAME: &'static str = "close";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        if self.ids.is_empty() {
            return Err(Refusal::Invalid("close needs at least one id".into()));
        }
        if self.ids.len() > IDS_PER_REQUEST_MAX {
            return Err(Refusal::Invalid(format!("close names more than {IDS_PER_REQUEST_MAX} ids; split it")));
        }
        let reason = self.reason.as_ref();
        reason.map_or(Ok(()), |reason| crate::validate::check_size("reason", reason, REASON_BYTES_MAX))
    }

    fn samples() -> Vec<Close> {
        let ids = vec![super::samples::bead_id(1), super::samples::bead_id(2)];
        vec![Close { ids, reason: Some("shipped".into()) }]
    }
}

impl BeadWriteCommand for Close {
    fn apply(&self, namespace: &mut NamespaceState, now: Timestamp) -> Answer {
        namespace.close(&self.ids, &self.reason, now)
    }

    fn resolved(&self, references: &References) -> Result<Close, Refusal> {
        let ids = self.ids.iter().map(|id| references.id(id)).collect::<Result<_, _>>()?;
        Ok(Close { ids, reason: self.reason.clone() })
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::Close;
    use crate::convert::{ToWriteRequest, ids_of, ids_to_proto, write_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::CloseRequest, |request| Ok(Close { ids: ids_of(request.ids), reason: request.reason }.into()));

    impl ToWriteRequest for Close {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let (ids, reason) = (ids_to_proto(self.ids.clone()), self.reason.clone());
            Some(pb::CloseRequest { header: Some(header), ids, reason }.into())
        }
    }
}
