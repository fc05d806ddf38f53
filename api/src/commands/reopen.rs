//! `reopen ID...`: move a closed bead back to open.

use serde::{Deserialize, Serialize};

use super::txn::References;
use super::{BeadWriteCommand, WriteCommand};
use crate::auth::Role;
use crate::model::{BeadId, Timestamp};
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;

registered!(bead_write 9 Reopen);

/// Move a closed bead back to open.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reopen {
    /// The bead.
    pub id: BeadId,
}

impl WriteCommand for Reopen {
    const NAME: &'static str = "reopen";
    const ROLE: Role = Role::Agent;

    fn samples() -> Vec<Reopen> {
        vec![Reopen { id: super::samples::bead_id(1) }]
    }
}

impl BeadWriteCommand for Reopen {
    fn apply(&self, namespace: &mut NamespaceState, now: Timestamp) -> Answer {
        namespace.reopen(&self.id, now)
    }

    fn resolved(&self, references: &References) -> Result<Reopen, Refusal> {
        Ok(Reopen { id: references.id(&self.id)? })
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::Reopen;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::model::BeadId;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::ReopenRequest, |request| Ok(Reopen { id: BeadId(request.id) }.into()));

    impl ToWriteRequest for Reopen {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            Some(pb::ReopenRequest { header: Some(header), id: self.id.0.clone() }.into())
        }
    }
}
