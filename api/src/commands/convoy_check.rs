//! `convoy check`: close every open, not-owned convoy whose children are all closed.

use serde::{Deserialize, Serialize};

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::outcome::Answer;
use crate::state::NamespaceState;

registered!(write 30 ConvoyCheck);

/// Close every finished convoy. It carries no field, so it encodes as its variant index alone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConvoyCheck;

impl WriteCommand for ConvoyCheck {
    const NAME: &'static str = "convoy_check";
    const ROLE: Role = Role::Agent;

    fn samples() -> Vec<ConvoyCheck> {
        vec![ConvoyCheck]
    }
}

impl NamespaceWrite for ConvoyCheck {
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        namespace.convoy_check(context.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::ConvoyCheck;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::ConvoyCheckRequest, |_request| Ok(ConvoyCheck.into()));

    impl ToWriteRequest for ConvoyCheck {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            Some(pb::ConvoyCheckRequest { header: Some(header) }.into())
        }
    }
}
