//! `formula delete NAME`: remove a stored formula.

use serde::{Deserialize, Serialize};

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;

registered!(write 17 FormulaDelete);

/// Remove a stored formula.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormulaDelete {
    /// Its name.
    pub name: String,
}

impl WriteCommand for FormulaDelete {
    const NAME: &'static str = "formula_delete";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        crate::validate::check_names(&[("formula name", &self.name)])
    }

    fn samples() -> Vec<FormulaDelete> {
        vec![FormulaDelete { name: "release".into() }]
    }
}

impl NamespaceWrite for FormulaDelete {
    fn apply(&self, namespace: &mut NamespaceState, _context: &Context) -> Answer {
        namespace.formula_delete(&self.name)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::FormulaDelete;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::FormulaDeleteRequest, |request| Ok(FormulaDelete { name: request.name }.into()));

    impl ToWriteRequest for FormulaDelete {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            Some(pb::FormulaDeleteRequest { header: Some(header), name: self.name.clone() }.into())
        }
    }
}
