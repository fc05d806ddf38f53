//! `mol status ROOT`: a molecule's progress: its root and its steps.

use serde::{Deserialize, Serialize};

use super::ReadCommand;
use crate::model::{BeadId, Namespace};
use crate::outcome::{Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 3 MolStatus);

/// Show the progress of the molecule rooted at `root`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MolStatus {
    /// The molecule's root.
    pub root: BeadId,
}

impl ReadCommand for MolStatus {
    const NAME: &'static str = "mol_status";

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        namespace.progress(&self.root, crate::model::MOLECULE_TYPE)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::MolStatus;
    use crate::convert::{ToReadRequest, read_request};
    use crate::model::BeadId;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::MolStatusRequest, |request, _now| Ok(MolStatus { root: BeadId(request.root) }.into()));

    impl ToReadRequest for MolStatus {
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            pb::MolStatusRequest { header: Some(header), root: self.root.0.clone() }.into()
        }
    }
}
