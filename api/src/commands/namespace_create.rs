//! `namespace create NS --prefix P`: create the proposal's namespace with an id prefix; creating
//! it again with the same prefix changes nothing, and a prefix is fixed at creation.

use serde::{Deserialize, Serialize};

use super::{ClusterWrite, WriteCommand};
use crate::auth::Role;
use crate::command::Proposal;
use crate::model::Timestamp;
use crate::outcome::{Answer, Refusal};
use crate::state::State;

registered!(cluster_write 13 NamespaceCreate);

/// Create the proposal's namespace with this id prefix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceCreate {
    /// Prefix of its ids.
    pub prefix: String,
}

impl WriteCommand for NamespaceCreate {
    const NAME: &'static str = "namespace_create";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        crate::validate::validate_prefix(&self.prefix)
    }

    fn samples() -> Vec<NamespaceCreate> {
        vec![NamespaceCreate { prefix: "rg".into() }]
    }
}

impl ClusterWrite for NamespaceCreate {
    fn apply(&self, state: &mut State, proposal: &Proposal, _now: Timestamp) -> Answer {
        state.namespace_create(&proposal.namespace, &self.prefix)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::NamespaceCreate;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::NamespaceCreateRequest, |request| Ok(NamespaceCreate { prefix: request.prefix }.into()));

    impl ToWriteRequest for NamespaceCreate {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            Some(pb::NamespaceCreateRequest { header: Some(header), prefix: self.prefix.clone() }.into())
        }
    }
}
