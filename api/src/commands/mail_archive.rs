//! `mail archive ID`: archive (close) a message; archiving an archived message is refused.

use serde::{Deserialize, Serialize};

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::model::BeadId;
use crate::outcome::Answer;
use crate::state::NamespaceState;

registered!(write 26 MailArchive);

/// Archive a message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailArchive {
    /// The message.
    pub id: BeadId,
}

impl WriteCommand for MailArchive {
    const NAME: &'static str = "mail_archive";
    const ROLE: Role = Role::Agent;

    fn samples() -> Vec<MailArchive> {
        vec![MailArchive { id: super::samples::bead_id(5) }]
    }
}

impl NamespaceWrite for MailArchive {
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        namespace.mail_archive(&self.id, context.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::MailArchive;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::model::BeadId;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::MailArchiveRequest, |request| Ok(MailArchive { id: BeadId(request.id) }.into()));

    impl ToWriteRequest for MailArchive {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            Some(pb::MailArchiveRequest { header: Some(header), id: self.id.0.clone() }.into())
        }
    }
}
