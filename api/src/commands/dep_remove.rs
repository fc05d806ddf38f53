//! `dep remove ID DEPENDS_ON`: remove a dependency edge; removing a missing edge is a no-op.

use serde::{Deserialize, Serialize};

use super::txn::References;
use super::{BeadWriteCommand, WriteCommand};
use crate::auth::Role;
use crate::model::{BeadId, Timestamp};
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;

registered!(bead_write 12 DepRemove);

/// Remove a dependency edge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DepRemove {
    /// The bead that waits.
    pub issue_id: BeadId,
    /// The bead it waited for.
    pub depends_on_id: BeadId,
}

impl WriteCommand for DepRemove {
    const NAME: &'static str = "dep_remove";
    const ROLE: Role = Role::Agent;

    fn samples() -> Vec<DepRemove> {
        vec![DepRemove { issue_id: super::samples::bead_id(1), depends_on_id: super::samples::bead_id(2) }]
    }
}

impl BeadWriteCommand for DepRemove {
    fn apply(&self, namespace: &mut NamespaceState, now: Timestamp) -> Answer {
        namespace.dep_remove(&self.issue_id, &self.depends_on_id, now)
    }

    fn resolved(&self, references: &References) -> Result<DepRemove, Refusal> {
        Ok(DepRemove { issue_id: references.id(&self.issue_id)?, depends_on_id: references.id(&self.depends_on_id)? })
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::DepRemove;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::model::BeadId;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::DepRemoveRequest, |request| {
        Ok(DepRemove { issue_id: BeadId(request.issue_id), depends_on_id: BeadId(request.depends_on_id) }.into())
    });

    impl ToWriteRequest for DepRemove {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let (issue_id, depends_on_id) = (self.issue_id.0.clone(), self.depends_on_id.0.clone());
            Some(pb::DepRemoveRequest { header: Some(header), issue_id, depends_on_id }.into())
        }
    }
}
