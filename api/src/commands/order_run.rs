//! `order run NAME`: fire an order now, whatever its trigger.

use serde::{Deserialize, Serialize};

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::outcome::{Answer, Refusal};
use crate::state::{Firing, NamespaceState};

registered!(write 20 OrderRun);

/// Fire an order now, whatever its trigger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderRun {
    /// Its name.
    pub name: String,
}

impl WriteCommand for OrderRun {
    const NAME: &'static str = "order_run";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        crate::validate::check_names(&[("order name", &self.name)])
    }

    fn samples() -> Vec<OrderRun> {
        vec![OrderRun { name: "nightly".into() }]
    }
}

impl NamespaceWrite for OrderRun {
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        namespace.order_fire(&self.name, Firing::Manual, context.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::OrderRun;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::OrderRunRequest, |request| Ok(OrderRun { name: request.name }.into()));

    impl ToWriteRequest for OrderRun {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            Some(pb::OrderRunRequest { header: Some(header), name: self.name.clone() }.into())
        }
    }
}
