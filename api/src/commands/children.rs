//! `children ID` (and `show --children`, the exec store's `children`): the beads whose parent is
//! a bead.

use serde::{Deserialize, Serialize};

use super::ReadCommand;
use crate::model::{BeadId, Namespace};
use crate::outcome::{Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 7 Children);

/// List the beads whose parent is `parent`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Children {
    /// The parent.
    pub parent: BeadId,
    /// Include closed children.
    pub include_closed: bool,
}

impl ReadCommand for Children {
    const NAME: &'static str = "children";

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        namespace.children(&self.parent, self.include_closed)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::Children;
    use crate::convert::{ToReadRequest, read_request};
    use crate::model::BeadId;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::ChildrenRequest, |request, _now| {
        Ok(Children { parent: BeadId(request.parent), include_closed: request.include_closed }.into())
    });

    impl ToReadRequest for Children {
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            let (parent, include_closed) = (self.parent.0.clone(), self.include_closed);
            pb::ChildrenRequest { header: Some(header), parent, include_closed }.into()
        }
    }
}
