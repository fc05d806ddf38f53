//! `sling SUBJECT TARGET`: route a bead (or a new task, or a convoy's open children) to an agent
//! or a pool, cooking a formula as a wisp first when asked.

use std::collections::BTreeMap;

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::command::FormulaSource;
use crate::limits::{LABEL_BYTES_MAX, TITLE_BYTES_MAX};
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;
use crate::validate::{check_identifier, check_names, check_size};

registered!(write 22 Sling);

pub use crate::input::Sling;

impl WriteCommand for Sling {
    const NAME: &'static str = "sling";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        if self.subject.trim().is_empty() {
            return Err(Refusal::Invalid("sling needs a bead id or a title".into()));
        }
        check_size("sling subject", &self.subject, TITLE_BYTES_MAX)?;
        let target_ok = !self.target.is_empty() && !self.target.contains(char::is_whitespace);
        if !target_ok {
            return Err(Refusal::Invalid(format!(
                "sling target {:?} is not an agent or pool name; give a name without spaces",
                self.target
            )));
        }
        check_names(&[("target", &self.target)])?;
        check_identifier("sling target", &self.target)?;
        if self.pool {
            let label = format!("{}{}", crate::model::POOL_LABEL_PREFIX, self.target);
            check_size("pool label", &label, LABEL_BYTES_MAX)?;
        }
        if let Some(merge) = &self.merge
            && !["direct", "mr", "local"].contains(&merge.as_str())
        {
            return Err(Refusal::Invalid(format!("--merge {merge:?} is unknown; use direct, mr or local")));
        }
        if let Some(formula) = &self.formula {
            let cook = super::Cook { formula: formula.clone(), title: None, vars: self.vars.clone(), ephemeral: true };
            cook.validate()?;
        }
        Ok(())
    }

    fn samples() -> Vec<Sling> {
        vec![Sling {
            subject: "st-1".into(),
            target: "web".into(),
            pool: true,
            formula: Some(FormulaSource::Inline(super::samples::FORMULA.into())),
            vars: BTreeMap::from([("version".into(), "1.2".into())]),
            no_convoy: true,
            owned: true,
            merge: Some("direct".into()),
        }]
    }
}

impl NamespaceWrite for Sling {
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        namespace.sling(self, context.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::Sling;
    use crate::convert::{ToWriteRequest, formula_of, formula_to_proto, non_empty, write_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::SlingRequest, |request| {
        Ok(Sling {
            subject: request.subject,
            target: request.target,
            pool: request.pool,
            formula: formula_of(request.formula),
            vars: request.vars.into_iter().collect(),
            no_convoy: request.no_convoy,
            owned: request.owned,
            merge: non_empty(request.merge),
        }
        .into())
    });

    impl ToWriteRequest for Sling {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let sling = self.clone();
            let request = pb::SlingRequest {
                header: Some(header),
                subject: sling.subject,
                target: sling.target,
                pool: sling.pool,
                formula: sling.formula.map(formula_to_proto),
                vars: sling.vars.into_iter().collect(),
                no_convoy: sling.no_convoy,
                owned: sling.owned,
                merge: sling.merge.unwrap_or_default(),
            };
            Some(request.into())
        }
    }
}
