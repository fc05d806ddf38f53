//! The exec store's `list --label`: the beads carrying exactly one label, newest first, closed
//! ones included.

use serde::{Deserialize, Serialize};

use super::ReadCommand;
use crate::model::Namespace;
use crate::outcome::{Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 8 ListByLabel);

/// List the beads carrying exactly `label`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListByLabel {
    /// The label.
    pub label: String,
    /// At most this many (0: unlimited).
    pub limit: u32,
}

impl ReadCommand for ListByLabel {
    const NAME: &'static str = "list_by_label";

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        namespace.list_by_label(&self.label, self.limit)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::ListByLabel;
    use crate::convert::{ToReadRequest, read_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::ListByLabelRequest, |request, _now| {
        Ok(ListByLabel { label: request.label, limit: request.limit }.into())
    });

    impl ToReadRequest for ListByLabel {
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            pb::ListByLabelRequest { header: Some(header), label: self.label.clone(), limit: self.limit }.into()
        }
    }
}
