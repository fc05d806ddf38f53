//! `import FILE` (and `create --id`, sent as an import of one bead): beads from another store
//! (`bd export`), with their ids, statuses and timestamps, added all together or not at all
//! (`NamespaceState::import` says how). An admin's command.

use serde::{Deserialize, Serialize};

use super::{Context, CreateBead, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::limits::{IMPORT_BEADS_MAX, NAME_BYTES_MAX, REASON_BYTES_MAX};
use crate::model::Bead;
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;
use crate::validate::{check_size, validate_bead_id};

registered!(write 33 Import);

pub use crate::input::is_create_with_id;

/// Beads from another store, added all together or not at all. `seq` and `revision` are
/// assigned here; no id may exist already; a `created_at` of 0 means now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Import {
    /// At most [`crate::limits::IMPORT_BEADS_MAX`].
    pub beads: Vec<Bead>,
}

impl WriteCommand for Import {
    const NAME: &'static str = "import";
    const ROLE: Role = Role::Admin;

    /// Checks imported beads as creates are checked, plus what a create does not carry: the id
    /// (its charset, [`validate_bead_id`]), the close reason, and each id appearing once. A
    /// refusal names the imported bead; that of a `create --id` ([`is_create_with_id`]) is the
    /// create's own.
    fn validate(&self) -> Result<(), Refusal> {
        let beads = &self.beads;
        if beads.is_empty() || beads.len() > IMPORT_BEADS_MAX {
            return Err(Refusal::Invalid(format!("an import holds 1 to {IMPORT_BEADS_MAX} beads; split it")));
        }
        let create = is_create_with_id(beads);
        let mut seen = std::collections::BTreeSet::new();
        for bead in beads {
            let id = &bead.id.0;
            let refused = |refusal: Refusal| {
                if create { refusal } else { Refusal::Invalid(format!("imported bead {id:?}: {refusal}")) }
            };
            validate_bead_id(id).map_err(refused)?;
            if !seen.insert(id) {
                return Err(refused(Refusal::Invalid("the id appears twice in the import".into())));
            }
            let as_create = CreateBead {
                title: bead.title.clone(),
                description: bead.description.clone(),
                notes: bead.notes.clone(),
                bead_type: bead.bead_type.clone(),
                priority: bead.priority,
                assignee: bead.assignee.clone(),
                from: bead.from.clone(),
                reference: bead.reference.clone(),
                labels: bead.labels.clone(),
                metadata: bead.metadata.clone(),
                ephemeral: bead.ephemeral,
                no_history: bead.no_history,
                needs: bead.depends_on.keys().map(|target| target.0.clone()).collect(),
                ..CreateBead::default()
            };
            as_create.validate().map_err(refused)?;
            if let Some(reason) = &bead.close_reason {
                check_size("close reason", reason, REASON_BYTES_MAX).map_err(refused)?;
            }
            for (target, dep_type) in &bead.depends_on {
                if target.0.is_empty() || dep_type.0.is_empty() {
                    return Err(refused(Refusal::Invalid("a dependency needs a target id and a type".into())));
                }
                check_size("dependency type", &dep_type.0, NAME_BYTES_MAX).map_err(refused)?;
            }
        }
        Ok(())
    }

    fn samples() -> Vec<Import> {
        vec![Import { beads: vec![super::samples::bead()] }]
    }
}

impl NamespaceWrite for Import {
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        namespace.import(&self.beads, context.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::Import;
    use crate::convert::{ToWriteRequest, bead_from_proto, write_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::ImportRequest, |request| {
        let beads = request.beads.into_iter().map(bead_from_proto).collect::<Result<_, _>>()?;
        Ok(Import { beads }.into())
    });

    impl ToWriteRequest for Import {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let beads = self.beads.iter().map(pb::Bead::from).collect();
            Some(pb::ImportRequest { header: Some(header), beads }.into())
        }
    }
}
