//! `dep add ID DEPENDS_ON`: add (or retype) a dependency edge.

use serde::{Deserialize, Serialize};

use super::txn::References;
use super::{BeadWriteCommand, WriteCommand};
use crate::auth::Role;
use crate::model::{BeadId, DepType, Timestamp};
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;

registered!(bead_write 11 DepAdd);

/// Add (or retype) a dependency edge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DepAdd {
    /// The bead that waits.
    pub issue_id: BeadId,
    /// The bead it waits for.
    pub depends_on_id: BeadId,
    /// The edge type.
    pub dep_type: DepType,
}

impl WriteCommand for DepAdd {
    const NAME: &'static str = "dep_add";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        if self.dep_type.0.is_empty() {
            return Err(Refusal::Invalid("dependency type must not be empty".into()));
        }
        crate::validate::check_names(&[("dependency type", &self.dep_type.0)])
    }

    fn samples() -> Vec<DepAdd> {
        use super::samples::bead_id;
        vec![DepAdd { issue_id: bead_id(1), depends_on_id: bead_id(2), dep_type: DepType("waits-for".into()) }]
    }
}

impl BeadWriteCommand for DepAdd {
    fn apply(&self, namespace: &mut NamespaceState, now: Timestamp) -> Answer {
        namespace.dep_add(&self.issue_id, &self.depends_on_id, &self.dep_type, now)
    }

    fn resolved(&self, references: &References) -> Result<DepAdd, Refusal> {
        let (issue_id, depends_on_id) = (references.id(&self.issue_id)?, references.id(&self.depends_on_id)?);
        Ok(DepAdd { issue_id, depends_on_id, dep_type: self.dep_type.clone() })
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::DepAdd;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::model::{BeadId, DepType};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::DepAddRequest, |request| {
        let dep_type = if request.r#type.is_empty() { DepType::blocks() } else { DepType(request.r#type) };
        let (issue_id, depends_on_id) = (BeadId(request.issue_id), BeadId(request.depends_on_id));
        Ok(DepAdd { issue_id, depends_on_id, dep_type }.into())
    });

    impl ToWriteRequest for DepAdd {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let request = pb::DepAddRequest {
                header: Some(header),
                issue_id: self.issue_id.0.clone(),
                depends_on_id: self.depends_on_id.0.clone(),
                r#type: self.dep_type.0.clone(),
            };
            Some(request.into())
        }
    }
}
