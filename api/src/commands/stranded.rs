//! `convoy stranded [ID]`: open children of convoys that nobody is assigned, of one convoy or all.

use serde::{Deserialize, Serialize};

use super::ReadCommand;
use crate::model::{BeadId, Namespace};
use crate::outcome::{Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 5 Stranded);

/// List the stranded work of one convoy, or of every open convoy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stranded {
    /// The convoy; `None`: every open convoy.
    pub convoy: Option<BeadId>,
}

impl ReadCommand for Stranded {
    const NAME: &'static str = "stranded";

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        namespace.stranded(self.convoy.as_ref())
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::Stranded;
    use crate::convert::{ToReadRequest, optional_id, read_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::StrandedRequest, |request, _now| Ok(Stranded { convoy: optional_id(&request.convoy) }.into()));

    impl ToReadRequest for Stranded {
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            pb::StrandedRequest {
                header: Some(header),
                convoy: self.convoy.as_ref().map(|id| id.0.clone()).unwrap_or_default(),
            }
            .into()
        }
    }
}
