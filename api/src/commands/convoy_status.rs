//! `convoy status ID`: a convoy's progress: the convoy and its children.

use serde::{Deserialize, Serialize};

use super::ReadCommand;
use crate::model::{BeadId, Namespace};
use crate::outcome::{Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 4 ConvoyStatus);

/// Show the progress of the convoy `id`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConvoyStatus {
    /// The convoy.
    pub id: BeadId,
}

impl ReadCommand for ConvoyStatus {
    const NAME: &'static str = "convoy_status";

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        namespace.progress(&self.id, crate::model::CONVOY_TYPE)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::ConvoyStatus;
    use crate::convert::{ToReadRequest, read_request};
    use crate::model::BeadId;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::ConvoyStatusRequest, |request, _now| Ok(ConvoyStatus { id: BeadId(request.id) }.into()));

    impl ToReadRequest for ConvoyStatus {
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            pb::ConvoyStatusRequest { header: Some(header), id: self.id.0.clone() }.into()
        }
    }
}
