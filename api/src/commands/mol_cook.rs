//! `mol cook FORMULA` (and `mol wisp`): cook a formula into a molecule, the root and one child
//! per step, in this one command.

use std::collections::BTreeMap;

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::command::FormulaSource;
use crate::limits::{DESCRIPTION_BYTES_MAX, FORMULA_BYTES_MAX, FORMULA_VARS_MAX};
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;
use crate::validate::{check_names, check_size, check_title};

registered!(write 21 MolCook Cook);

pub use crate::input::Cook;

impl WriteCommand for Cook {
    const NAME: &'static str = "mol_cook";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        match &self.formula {
            FormulaSource::Named(name) => check_names(&[("formula name", name)])?,
            FormulaSource::Inline(source) => check_size("formula", source, FORMULA_BYTES_MAX)?,
        }
        if let Some(title) = &self.title {
            check_title(title)?;
        }
        if self.vars.len() > FORMULA_VARS_MAX {
            return Err(Refusal::Invalid(format!("more than {FORMULA_VARS_MAX} variables; pass fewer --var")));
        }
        self.vars.iter().try_for_each(|(key, value)| {
            check_names(&[("variable name", key)])?;
            check_size(&format!("variable {key}"), value, DESCRIPTION_BYTES_MAX)
        })
    }

    fn samples() -> Vec<Cook> {
        vec![Cook {
            formula: FormulaSource::Named("release".into()),
            title: Some("Release 1.2".into()),
            vars: BTreeMap::from([("version".into(), "1.2".into())]),
            ephemeral: true,
        }]
    }
}

impl NamespaceWrite for Cook {
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        namespace.mol_cook(self, context.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::Cook;
    use crate::convert::{ToWriteRequest, formula_of, formula_to_proto, non_empty, write_request};
    use crate::outcome::Refusal;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::CookRequest, |request| {
        let formula = formula_of(request.formula)
            .ok_or_else(|| Refusal::Invalid("a cook needs a formula: a stored formula's name or its TOML".into()))?;
        let title = non_empty(request.title);
        Ok(Cook { formula, title, vars: request.vars.into_iter().collect(), ephemeral: request.ephemeral }.into())
    });

    impl ToWriteRequest for Cook {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let request = pb::CookRequest {
                header: Some(header),
                formula: Some(formula_to_proto(self.formula.clone())),
                title: self.title.clone().unwrap_or_default(),
                vars: self.vars.clone().into_iter().collect(),
                ephemeral: self.ephemeral,
            };
            Some(request.into())
        }
    }
}
