//! `formula list`: the namespace's stored formulas, by name, without their sources.

use serde::{Deserialize, Serialize};

use super::ReadCommand;
use crate::model::Namespace;
use crate::outcome::{Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 1 FormulaList);

/// List the request's namespace's stored formulas.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormulaList;

impl ReadCommand for FormulaList {
    const NAME: &'static str = "formula_list";

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        Ok(namespace.formula_list())
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::FormulaList;
    use crate::convert::{ToReadRequest, read_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::FormulaListRequest, |_request, _now| Ok(FormulaList.into()));

    impl ToReadRequest for FormulaList {
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            pb::FormulaListRequest { header: Some(header) }.into()
        }
    }
}
