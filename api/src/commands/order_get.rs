//! `order show NAME`: one stored order, with its source, its firings and when it is next due.

use serde::{Deserialize, Serialize};

use super::ReadCommand;
use crate::model::{Namespace, Timestamp};
use crate::outcome::{Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 12 OrderGet);

/// Show one stored order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderGet {
    /// Its name.
    pub name: String,
    /// The reader's clock, for when it is next due (the node sets it; a client's is ignored).
    pub now: Timestamp,
}

impl ReadCommand for OrderGet {
    const NAME: &'static str = "order_get";

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        namespace.order_get(&self.name, self.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::OrderGet;
    use crate::convert::{ToReadRequest, read_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::OrderGetRequest, |request, now| Ok(OrderGet { name: request.name, now }.into()));

    impl ToReadRequest for OrderGet {
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            pb::OrderGetRequest { header: Some(header), name: self.name.clone() }.into()
        }
    }
}
