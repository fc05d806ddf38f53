//! `formula show NAME`: one stored formula, with its source.

use serde::{Deserialize, Serialize};

use super::ReadCommand;
use crate::model::Namespace;
use crate::outcome::{Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 2 FormulaGet);

/// Show one stored formula of the request's namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormulaGet {
    /// Its name.
    pub name: String,
}

impl ReadCommand for FormulaGet {
    const NAME: &'static str = "formula_get";

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        namespace.formula_get(&self.name)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::FormulaGet;
    use crate::convert::{ToReadRequest, read_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::FormulaGetRequest, |request, _now| Ok(FormulaGet { name: request.name }.into()));

    impl ToReadRequest for FormulaGet {
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            pb::FormulaGetRequest { header: Some(header), name: self.name.clone() }.into()
        }
    }
}
