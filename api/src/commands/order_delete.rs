//! `order delete NAME`: remove a stored order.

use serde::{Deserialize, Serialize};

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;

registered!(write 19 OrderDelete);

/// Remove a stored order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderDelete {
    /// Its name.
    pub name: String,
}

impl WriteCommand for OrderDelete {
    const NAME: &'static str = "order_delete";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        crate::validate::check_names(&[("order name", &self.name)])
    }

    fn samples() -> Vec<OrderDelete> {
        vec![OrderDelete { name: "nightly".into() }]
    }
}

impl NamespaceWrite for OrderDelete {
    fn apply(&self, namespace: &mut NamespaceState, _context: &Context) -> Answer {
        namespace.order_delete(&self.name)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::OrderDelete;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::OrderDeleteRequest, |request| Ok(OrderDelete { name: request.name }.into()));

    impl ToWriteRequest for OrderDelete {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            Some(pb::OrderDeleteRequest { header: Some(header), name: self.name.clone() }.into())
        }
    }
}
