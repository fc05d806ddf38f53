//! `dep list ID [--direction up|down]`: a bead's dependency edges, those it has (down) or those
//! pointing at it (up).

use serde::{Deserialize, Serialize};

use super::ReadCommand;
use crate::command::DepDirection;
use crate::model::{BeadId, Namespace};
use crate::outcome::{Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 9 DepList);

/// List the dependency edges of a bead.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DepList {
    /// The bead.
    pub id: BeadId,
    /// Which way.
    pub direction: DepDirection,
}

impl ReadCommand for DepList {
    const NAME: &'static str = "dep_list";

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        Ok(namespace.dep_list(&self.id, self.direction))
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::DepList;
    use crate::command::DepDirection;
    use crate::convert::{ToReadRequest, read_request};
    use crate::model::BeadId;
    use crate::outcome::Refusal;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::DepListRequest, |request, _now| {
        let direction = match request.direction.as_str() {
            "" | "down" => DepDirection::Down,
            "up" => DepDirection::Up,
            other => return Err(Refusal::Invalid(format!("unknown direction {other:?}; use down or up"))),
        };
        Ok(DepList { id: BeadId(request.id), direction }.into())
    });

    impl ToReadRequest for DepList {
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            let direction = match self.direction {
                DepDirection::Down => "down",
                DepDirection::Up => "up",
            };
            pb::DepListRequest { header: Some(header), id: self.id.0.clone(), direction: direction.into() }.into()
        }
    }
}
