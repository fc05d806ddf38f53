//! `namespace configure NS`: change a namespace's lease settings (the default lease of claims
//! that name none, and the expiries before a bead is dead-lettered).

use serde::{Deserialize, Serialize};

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::limits::MAX_DELIVERIES_MAX;
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;

registered!(write 14 NamespaceConfigure);

/// Change the proposal's namespace's lease settings; `None` leaves a setting as it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceConfigure {
    /// The lease of claims that name none: `Some(None)` clears it.
    pub default_lease_ms: Option<Option<u64>>,
    /// Expiries before a bead is dead-lettered (1 to [`crate::limits::MAX_DELIVERIES_MAX`]).
    pub max_deliveries: Option<u32>,
}

impl WriteCommand for NamespaceConfigure {
    const NAME: &'static str = "namespace_configure";
    const ROLE: Role = Role::Admin;

    fn validate(&self) -> Result<(), Refusal> {
        if self.default_lease_ms.is_none() && self.max_deliveries.is_none() {
            return Err(Refusal::Invalid(
                "namespace configure needs a setting: --default-lease or --max-deliveries".into(),
            ));
        }
        if let Some(Some(lease_ms)) = self.default_lease_ms {
            crate::validate::validate_lease(lease_ms)?;
        }
        match self.max_deliveries {
            Some(count) if !(1..=MAX_DELIVERIES_MAX).contains(&count) => Err(Refusal::Invalid(format!(
                "max_deliveries {count} is out of range; allow 1 to {MAX_DELIVERIES_MAX} deliveries"
            ))),
            _ => Ok(()),
        }
    }

    fn samples() -> Vec<NamespaceConfigure> {
        vec![NamespaceConfigure { default_lease_ms: Some(Some(45_000)), max_deliveries: Some(7) }]
    }
}

impl NamespaceWrite for NamespaceConfigure {
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        Ok(namespace.configure(context.name, self.default_lease_ms, self.max_deliveries))
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::NamespaceConfigure;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::outcome::Refusal;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::NamespaceConfigureRequest, |request| {
        let default_lease_ms = match (request.clear_default_lease, request.default_lease_ms) {
            (true, Some(_)) => {
                return Err(Refusal::Invalid(
                    "a namespace configure both sets and clears the default lease; do one".into(),
                ));
            }
            (true, None) => Some(None),
            (false, lease_ms) => lease_ms.map(Some),
        };
        Ok(NamespaceConfigure { default_lease_ms, max_deliveries: request.max_deliveries }.into())
    });

    impl ToWriteRequest for NamespaceConfigure {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let request = pb::NamespaceConfigureRequest {
                header: Some(header),
                default_lease_ms: self.default_lease_ms.flatten(),
                clear_default_lease: self.default_lease_ms == Some(None),
                max_deliveries: self.max_deliveries,
            };
            Some(request.into())
        }
    }
}
