//! `order list`: every stored order of the namespace, with when each is next due.

use serde::{Deserialize, Serialize};

use super::ReadCommand;
use crate::model::{Namespace, Timestamp};
use crate::outcome::{Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 13 OrderList);

/// List the stored orders.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderList {
    /// The reader's clock, for when each is next due (the node sets it; a client's is ignored).
    pub now: Timestamp,
}

impl ReadCommand for OrderList {
    const NAME: &'static str = "order_list";

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        Ok(namespace.order_list(self.now))
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::OrderList;
    use crate::convert::{ToReadRequest, read_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::OrderListRequest, |_request, now| Ok(OrderList { now }.into()));

    impl ToReadRequest for OrderList {
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            pb::OrderListRequest { header: Some(header) }.into()
        }
    }
}
