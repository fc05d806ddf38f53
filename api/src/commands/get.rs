//! `show ID...` and the other reads of beads by id: [`Get`] answers every id or is refused
//! naming the first missing one; [`Lookup`] answers those that exist, in the order asked. Both
//! travel as one `GetRequest`, told apart by its `missing_ok`.

use serde::{Deserialize, Serialize};

use super::ReadCommand;
use crate::model::{BeadId, Namespace};
use crate::outcome::{Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 15 Get);
registered!(read 16 Lookup);

/// Read beads by id; all must exist.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Get {
    /// The ids (at most [`crate::limits::IDS_PER_REQUEST_MAX`]).
    pub ids: Vec<BeadId>,
}

impl ReadCommand for Get {
    const NAME: &'static str = "get";

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        namespace.get(&self.ids)
    }
}

/// Read the beads of these ids that exist, in the order asked; missing ids are left out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lookup {
    /// The ids (at most [`crate::limits::IDS_PER_REQUEST_MAX`]).
    pub ids: Vec<BeadId>,
}

impl ReadCommand for Lookup {
    const NAME: &'static str = "lookup";

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        Ok(namespace.lookup(&self.ids))
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::{Get, Lookup};
    use crate::command::Query;
    use crate::convert::{ToReadRequest, ids_to_proto, read_request};
    use crate::limits::IDS_PER_REQUEST_MAX;
    use crate::model::BeadId;
    use crate::outcome::Refusal;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::GetRequest, |request, _now| {
        if request.ids.len() > IDS_PER_REQUEST_MAX {
            return Err(Refusal::Invalid(format!("get names more than {IDS_PER_REQUEST_MAX} ids")));
        }
        let ids = request.ids.into_iter().map(BeadId).collect();
        Ok(if request.missing_ok { Query::from(Lookup { ids }) } else { Query::from(Get { ids }) })
    });

    fn request(header: pb::ReadHeader, ids: &[BeadId], missing_ok: bool) -> ClientRpc {
        pb::GetRequest { header: Some(header), ids: ids_to_proto(ids.to_vec()), missing_ok }.into()
    }

    impl ToReadRequest for Get {
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            request(header, &self.ids, false)
        }
    }

    impl ToReadRequest for Lookup {
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            request(header, &self.ids, true)
        }
    }
}
