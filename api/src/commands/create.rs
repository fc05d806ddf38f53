//! `create TITLE` (and the exec store's `create`): one new bead, open, under the next id of its
//! namespace (or its parent's next child id).

use super::txn::References;
use super::{BeadWriteCommand, WriteCommand};
use crate::auth::Role;
use crate::limits::{DEPENDENCIES_PER_BEAD_MAX, DESCRIPTION_BYTES_MAX, NAME_BYTES_MAX};
use crate::model::Timestamp;
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;
use crate::validate::{
    check_identifier, check_labels, check_metadata, check_names, check_new_labels, check_priority, check_size,
    check_title,
};

registered!(bead_write 0 Create CreateBead);

pub use crate::input::CreateBead;

impl WriteCommand for CreateBead {
    const NAME: &'static str = "create";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        check_title(&self.title)?;
        if self.ephemeral && self.no_history {
            return Err(Refusal::Invalid(
                "a bead is either ephemeral (a wisp) or no_history, not both; drop one of them".into(),
            ));
        }
        check_size("description", &self.description, DESCRIPTION_BYTES_MAX)?;
        check_size("notes", &self.notes, DESCRIPTION_BYTES_MAX)?;
        check_priority(self.priority)?;
        check_names(&[
            ("type", &self.bead_type),
            ("assignee", &self.assignee),
            ("from", &self.from),
            ("ref", &self.reference),
        ])?;
        check_identifier("assignee", &self.assignee)?;
        check_identifier("from", &self.from)?;
        check_labels(&self.labels)?;
        check_new_labels(&self.labels)?;
        check_metadata(self.metadata.iter().map(|(key, value)| (key, Some(value))))?;
        if self.needs.len() > DEPENDENCIES_PER_BEAD_MAX {
            return Err(Refusal::Invalid(format!("more than {DEPENDENCIES_PER_BEAD_MAX} needs")));
        }
        self.needs.iter().try_for_each(|need| check_size("need", need, NAME_BYTES_MAX))
    }

    fn other_actor<'a>(&'a self, own: &str) -> Option<&'a str> {
        super::named(&self.assignee, own).or_else(|| super::named(&self.from, own))
    }

    fn samples() -> Vec<CreateBead> {
        vec![super::samples::create_bead()]
    }
}

impl BeadWriteCommand for CreateBead {
    fn apply(&self, namespace: &mut NamespaceState, now: Timestamp) -> Answer {
        namespace.create(self, now)
    }

    fn resolved(&self, references: &References) -> Result<CreateBead, Refusal> {
        let mut create = self.clone();
        if let Some(parent_id) = &mut create.parent_id {
            *parent_id = references.id(parent_id)?;
        }
        for need in &mut create.needs {
            *need = references.need(need)?;
        }
        Ok(create)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::CreateBead;
    use crate::convert::{ToWriteRequest, optional_id, parse_priority, parse_status, write_request};
    use crate::model::Timestamp;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::CreateRequest, |request| {
        let requested_status = if request.status.is_empty() { None } else { Some(parse_status(&request.status)?) };
        Ok(CreateBead {
            title: request.title,
            description: request.description,
            notes: request.notes,
            bead_type: request.r#type,
            priority: parse_priority(request.priority)?,
            assignee: request.assignee,
            from: request.from,
            parent_id: optional_id(&request.parent_id),
            reference: request.r#ref,
            needs: request.needs,
            labels: request.labels.into_iter().collect(),
            metadata: request.metadata.into_iter().collect(),
            ephemeral: request.ephemeral,
            no_history: request.no_history,
            defer_until: request.defer_until_ms.map(Timestamp),
            requested_status,
        }
        .into())
    });

    impl ToWriteRequest for CreateBead {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let create = self.clone();
            let request = pb::CreateRequest {
                header: Some(header),
                title: create.title,
                description: create.description,
                notes: create.notes,
                r#type: create.bead_type,
                priority: create.priority.map(u32::from),
                assignee: create.assignee,
                from: create.from,
                parent_id: create.parent_id.map(|id| id.0).unwrap_or_default(),
                r#ref: create.reference,
                needs: create.needs,
                labels: create.labels.into_iter().collect(),
                metadata: create.metadata.into_iter().collect(),
                ephemeral: create.ephemeral,
                no_history: create.no_history,
                defer_until_ms: create.defer_until.map(|time| time.0),
                status: create.requested_status.map(|status| status.as_str().to_string()).unwrap_or_default(),
            };
            Some(request.into())
        }
    }
}
