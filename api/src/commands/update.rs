//! `update ID` (and `assign`, `label`, `comment`, the exec store's `update`): change fields of one
//! bead; unset fields stay unchanged, and with `claim_for` the bead is claimed first, atomically
//! with the other changes.

use super::txn::References;
use super::{BeadWriteCommand, WriteCommand};
use crate::auth::Role;
use crate::limits::DESCRIPTION_BYTES_MAX;
use crate::model::{Actor, Timestamp};
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;
use crate::validate::{
    check_identifier, check_labels, check_metadata, check_names, check_new_labels, check_priority, check_size,
    check_title, validate_lease,
};

registered!(bead_write 1 Update UpdateBead);

pub use crate::input::UpdateBead;

impl WriteCommand for UpdateBead {
    const NAME: &'static str = "update";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        if let Some(title) = &self.title {
            check_title(title)?;
        }
        for (what, text) in [("description", &self.description), ("notes", &self.notes), ("notes", &self.append_notes)]
        {
            if let Some(text) = text {
                check_size(what, text, DESCRIPTION_BYTES_MAX)?;
            }
        }
        check_priority(self.priority)?;
        if let Some(lease_ms) = self.lease_ms {
            if self.claim_for.is_none() {
                return Err(Refusal::Invalid("a lease comes with a claim; add --claim".into()));
            }
            validate_lease(lease_ms)?;
        }
        for (what, value) in [("type", &self.bead_type), ("assignee", &self.assignee)] {
            if let Some(value) = value {
                check_names(&[(what, value)])?;
            }
        }
        if let Some(assignee) = &self.assignee {
            check_identifier("assignee", assignee)?;
        }
        if let Some(actor) = &self.claim_for {
            check_identifier("actor", &actor.0)?;
        }
        if self.bead_type.as_deref() == Some("") {
            return Err(Refusal::Invalid("type must not be empty".into()));
        }
        check_labels(self.add_labels.iter().chain(&self.remove_labels))?;
        check_new_labels(&self.add_labels)?;
        check_metadata(self.metadata.iter().map(|(key, value)| (key, value.as_ref())))
    }

    fn other_actor<'a>(&'a self, own: &str) -> Option<&'a str> {
        let claimant = self.claim_for.as_ref().and_then(|actor| super::claimant(actor, own));
        claimant.or_else(|| self.assignee.as_deref().and_then(|assignee| super::named(assignee, own)))
    }

    fn fill_claimants(&mut self, actor: &Actor) {
        if let Some(claimant) = self.claim_for.as_mut() {
            super::fill_claimant(claimant, actor);
        }
    }

    fn samples() -> Vec<UpdateBead> {
        vec![super::samples::update_bead()]
    }
}

impl BeadWriteCommand for UpdateBead {
    fn apply(&self, namespace: &mut NamespaceState, now: Timestamp) -> Answer {
        namespace.update(self, now)
    }

    fn resolved(&self, references: &References) -> Result<UpdateBead, Refusal> {
        let mut update = self.clone();
        update.id = references.id(&update.id)?;
        if let Some(parent_id) = update.parent_id.as_mut().filter(|parent_id| !parent_id.0.is_empty()) {
            *parent_id = references.id(parent_id)?;
        }
        Ok(update)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::UpdateBead;
    use crate::convert::{
        ToWriteRequest, metadata_changes, metadata_to_proto, parse_priority, parse_status, write_request,
    };
    use crate::model::{Actor, BeadId};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::UpdateRequest, |request| {
        Ok(UpdateBead {
            id: BeadId(request.id),
            title: request.title,
            description: request.description,
            notes: request.notes,
            append_notes: request.append_notes,
            ephemeral: request.ephemeral,
            no_history: request.no_history,
            status: request.status.as_deref().map(parse_status).transpose()?,
            bead_type: request.r#type,
            priority: parse_priority(request.priority)?,
            assignee: request.assignee,
            parent_id: request.parent_id.map(BeadId),
            add_labels: request.add_labels.into_iter().collect(),
            remove_labels: request.remove_labels.into_iter().collect(),
            metadata: metadata_changes(request.metadata),
            claim_for: request.claim_for.map(Actor),
            lease_ms: request.lease_ms,
        }
        .into())
    });

    impl ToWriteRequest for UpdateBead {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let update = self.clone();
            let request = pb::UpdateRequest {
                header: Some(header),
                id: update.id.0,
                title: update.title,
                description: update.description,
                notes: update.notes,
                append_notes: update.append_notes,
                ephemeral: update.ephemeral,
                no_history: update.no_history,
                status: update.status.map(|status| status.as_str().to_string()),
                r#type: update.bead_type,
                priority: update.priority.map(u32::from),
                assignee: update.assignee,
                parent_id: update.parent_id.map(|id| id.0),
                add_labels: update.add_labels.into_iter().collect(),
                remove_labels: update.remove_labels.into_iter().collect(),
                metadata: metadata_to_proto(update.metadata),
                claim_for: update.claim_for.map(|actor| actor.0),
                lease_ms: update.lease_ms,
            };
            Some(request.into())
        }
    }
}
