//! `delete ID`: remove a bead and every dependency edge that touches it.

use serde::{Deserialize, Serialize};

use super::txn::References;
use super::{BeadWriteCommand, WriteCommand};
use crate::auth::Role;
use crate::model::{BeadId, Timestamp};
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;

registered!(bead_write 10 Delete);

/// Remove a bead and every dependency edge that touches it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delete {
    /// The bead.
    pub id: BeadId,
}

impl WriteCommand for Delete {
    const NAME: &'static str = "delete";
    const ROLE: Role = Role::Agent;

    fn samples() -> Vec<Delete> {
        vec![Delete { id: super::samples::bead_id(2) }]
    }
}

impl BeadWriteCommand for Delete {
    fn apply(&self, namespace: &mut NamespaceState, now: Timestamp) -> Answer {
        namespace.delete(&self.id, now)
    }

    fn resolved(&self, references: &References) -> Result<Delete, Refusal> {
        Ok(Delete { id: references.id(&self.id)? })
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::Delete;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::model::BeadId;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::DeleteRequest, |request| Ok(Delete { id: BeadId(request.id) }.into()));

    impl ToWriteRequest for Delete {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            Some(pb::DeleteRequest { header: Some(header), id: self.id.0.clone() }.into())
        }
    }
}
