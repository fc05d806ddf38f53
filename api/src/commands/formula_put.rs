//! `formula put FILE`: store (or replace) a named formula; its source is parsed and checked first.

use serde::{Deserialize, Serialize};

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::limits::FORMULA_BYTES_MAX;
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;

registered!(write 16 FormulaPut);

/// Store (or replace) a named formula.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormulaPut {
    /// The formula's TOML.
    pub source: String,
}

impl WriteCommand for FormulaPut {
    const NAME: &'static str = "formula_put";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        crate::validate::check_size("formula", &self.source, FORMULA_BYTES_MAX)
    }

    fn samples() -> Vec<FormulaPut> {
        vec![FormulaPut { source: super::samples::FORMULA.into() }]
    }
}

impl NamespaceWrite for FormulaPut {
    fn apply(&self, namespace: &mut NamespaceState, _context: &Context) -> Answer {
        namespace.formula_put(&self.source)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::FormulaPut;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::FormulaPutRequest, |request| Ok(FormulaPut { source: request.source }.into()));

    impl ToWriteRequest for FormulaPut {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            Some(pb::FormulaPutRequest { header: Some(header), source: self.source.clone() }.into())
        }
    }
}
