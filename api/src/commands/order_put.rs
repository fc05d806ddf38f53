//! `order put FILE`: store (or replace) an order; its source is parsed and checked first, and its
//! formula must be stored. A replaced order keeps its firings.

use serde::{Deserialize, Serialize};

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::limits::ORDER_BYTES_MAX;
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;

registered!(write 18 OrderPut);

/// Store (or replace) an order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderPut {
    /// Its name.
    pub name: String,
    /// The order's TOML (`[order]`, as Gas City writes it).
    pub source: String,
}

impl WriteCommand for OrderPut {
    const NAME: &'static str = "order_put";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        crate::validate::check_names(&[("order name", &self.name)])?;
        crate::validate::check_size("order", &self.source, ORDER_BYTES_MAX)
    }

    fn samples() -> Vec<OrderPut> {
        vec![OrderPut { name: "nightly".into(), source: super::samples::ORDER.into() }]
    }
}

impl NamespaceWrite for OrderPut {
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        namespace.order_put(&self.name, &self.source, context.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::OrderPut;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::OrderPutRequest, |request| Ok(OrderPut { name: request.name, source: request.source }.into()));

    impl ToWriteRequest for OrderPut {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let (name, source) = (self.name.clone(), self.source.clone());
            Some(pb::OrderPutRequest { header: Some(header), name, source }.into())
        }
    }
}
