//! What `strand import` sends when a later batch of a file is refused: the beads an earlier
//! batch wrote, taken out again all together or not at all, each only while still at the
//! revision the import gave it (`NamespaceState::import_undo` says how). An admin's command.

use serde::{Deserialize, Serialize};

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::limits::{DEPENDENCIES_PER_BEAD_MAX, IMPORT_BEADS_MAX};
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;

registered!(write 34 ImportUndo);

pub use crate::input::ImportedBead;

/// Take out again beads an import wrote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportUndo {
    /// At most [`crate::limits::IMPORT_BEADS_MAX`].
    pub beads: Vec<ImportedBead>,
}

impl WriteCommand for ImportUndo {
    const NAME: &'static str = "import_undo";
    const ROLE: Role = Role::Admin;

    fn validate(&self) -> Result<(), Refusal> {
        if self.beads.is_empty() || self.beads.len() > IMPORT_BEADS_MAX {
            return Err(Refusal::Invalid(format!("an import undo names 1 to {IMPORT_BEADS_MAX} beads; split it")));
        }
        if self.beads.iter().any(|bead| bead.edges.len() > DEPENDENCIES_PER_BEAD_MAX) {
            return Err(Refusal::Invalid(format!("an imported bead has at most {DEPENDENCIES_PER_BEAD_MAX} edges")));
        }
        Ok(())
    }

    fn samples() -> Vec<ImportUndo> {
        let (id, edges) = (super::samples::bead_id(7), vec![super::samples::bead_id(2)]);
        vec![ImportUndo { beads: vec![ImportedBead { id, revision: 42, edges }] }]
    }
}

impl NamespaceWrite for ImportUndo {
    fn apply(&self, namespace: &mut NamespaceState, _context: &Context) -> Answer {
        namespace.import_undo(&self.beads)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::{ImportUndo, ImportedBead};
    use crate::convert::{ToWriteRequest, ids_of, ids_to_proto, write_request};
    use crate::model::BeadId;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::ImportUndoRequest, |request| {
        let beads = request
            .beads
            .into_iter()
            .map(|bead| ImportedBead { id: BeadId(bead.id), revision: bead.revision, edges: ids_of(bead.edges) })
            .collect();
        Ok(ImportUndo { beads }.into())
    });

    impl ToWriteRequest for ImportUndo {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let beads = self
                .beads
                .iter()
                .map(|bead| pb::ImportedBead {
                    id: bead.id.0.clone(),
                    revision: bead.revision,
                    edges: ids_to_proto(bead.edges.clone()),
                })
                .collect();
            Some(pb::ImportUndoRequest { header: Some(header), beads }.into())
        }
    }
}
