//! `convoy create TITLE ID...`: a convoy tracking beads, which become its children.

use serde::{Deserialize, Serialize};

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::model::BeadId;
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;

registered!(write 27 ConvoyCreate);

/// Create a convoy tracking these beads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConvoyCreate {
    /// Its title.
    pub title: String,
    /// The tracked beads.
    pub children: Vec<BeadId>,
    /// Label it `owned` (no auto-close).
    pub owned: bool,
}

impl WriteCommand for ConvoyCreate {
    const NAME: &'static str = "convoy_create";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        crate::validate::check_title(&self.title)?;
        crate::validate::check_routed(self.children.len())
    }

    fn samples() -> Vec<ConvoyCreate> {
        let children = vec![super::samples::bead_id(1), super::samples::bead_id(2)];
        vec![ConvoyCreate { title: "Release train".into(), children, owned: true }]
    }
}

impl NamespaceWrite for ConvoyCreate {
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        namespace.convoy_create(&self.title, &self.children, self.owned, context.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::ConvoyCreate;
    use crate::convert::{ToWriteRequest, ids_of, ids_to_proto, write_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::ConvoyCreateRequest, |request| {
        Ok(ConvoyCreate { title: request.title, children: ids_of(request.children), owned: request.owned }.into())
    });

    impl ToWriteRequest for ConvoyCreate {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let (title, children) = (self.title.clone(), ids_to_proto(self.children.clone()));
            Some(pb::ConvoyCreateRequest { header: Some(header), title, children, owned: self.owned }.into())
        }
    }
}
