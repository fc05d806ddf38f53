//! Set (or remove) metadata keys of one bead, all in one step: the exec store's `set-metadata`,
//! a `set-metadata` write of `strand tx`, gates, and Gas City's graph plans send it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::txn::References;
use super::{BeadWriteCommand, WriteCommand};
use crate::auth::Role;
use crate::model::{BeadId, Timestamp};
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;

registered!(bead_write 2 SetMetadata);

/// Set (or with `None`, remove) metadata keys of one bead, all in one step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetMetadata {
    /// The bead.
    pub id: BeadId,
    /// Key to new value; `None` removes the key.
    pub entries: BTreeMap<String, Option<String>>,
}

impl WriteCommand for SetMetadata {
    const NAME: &'static str = "set_metadata";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        if self.entries.is_empty() {
            return Err(Refusal::Invalid("set_metadata needs at least one key".into()));
        }
        crate::validate::check_metadata(self.entries.iter().map(|(key, value)| (key, value.as_ref())))
    }

    fn samples() -> Vec<SetMetadata> {
        let entries = BTreeMap::from([("gc.merge".into(), Some("mr".into())), ("stale".into(), None)]);
        vec![SetMetadata { id: super::samples::bead_id(1), entries }]
    }
}

impl BeadWriteCommand for SetMetadata {
    fn apply(&self, namespace: &mut NamespaceState, now: Timestamp) -> Answer {
        namespace.set_metadata(&self.id, &self.entries, now)
    }

    /// The id, and the values that are exactly `$N` (elsewhere a value is kept as written).
    fn resolved(&self, references: &References) -> Result<SetMetadata, Refusal> {
        let mut write = self.clone();
        write.id = references.id(&write.id)?;
        for value in write.entries.values_mut().flatten() {
            references.value(value)?;
        }
        Ok(write)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::SetMetadata;
    use crate::convert::{ToWriteRequest, metadata_changes, metadata_to_proto, write_request};
    use crate::model::BeadId;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::SetMetadataRequest, |request| {
        Ok(SetMetadata { id: BeadId(request.id), entries: metadata_changes(request.entries) }.into())
    });

    impl ToWriteRequest for SetMetadata {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let (id, entries) = (self.id.0.clone(), metadata_to_proto(self.entries.clone()));
            Some(pb::SetMetadataRequest { header: Some(header), id, entries }.into())
        }
    }
}
