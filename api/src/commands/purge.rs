//! `purge`: remove the wisps closed more than an age ago, at most
//! [`crate::limits::PURGE_BEADS_MAX`] in one command. An admin's command.

use serde::{Deserialize, Serialize};

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;

registered!(write 31 Purge);

/// Remove closed wisps closed more than `older_than_ms` ago.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Purge {
    /// Minimum age since close, in milliseconds (0: every closed wisp).
    pub older_than_ms: i64,
}

impl WriteCommand for Purge {
    const NAME: &'static str = "purge";
    const ROLE: Role = Role::Admin;

    fn validate(&self) -> Result<(), Refusal> {
        if self.older_than_ms < 0 {
            return Err(Refusal::Invalid("purge --older-than must not be negative".into()));
        }
        Ok(())
    }

    fn samples() -> Vec<Purge> {
        vec![Purge { older_than_ms: 86_400_000 }]
    }
}

impl NamespaceWrite for Purge {
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        namespace.purge(self.older_than_ms, context.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::Purge;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::PurgeRequest, |request| Ok(Purge { older_than_ms: request.older_than_ms }.into()));

    impl ToWriteRequest for Purge {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            Some(pb::PurgeRequest { header: Some(header), older_than_ms: self.older_than_ms }.into())
        }
    }
}
