//! `mail read ID` and `mail unread ID`: mark a message read (adds the `read` label) or unread.

use serde::{Deserialize, Serialize};

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::model::BeadId;
use crate::outcome::Answer;
use crate::state::NamespaceState;

registered!(write 25 MailMark);

/// Mark a message read or unread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailMark {
    /// The message.
    pub id: BeadId,
    /// Read or unread.
    pub read: bool,
}

impl WriteCommand for MailMark {
    const NAME: &'static str = "mail_mark";
    const ROLE: Role = Role::Agent;

    fn samples() -> Vec<MailMark> {
        vec![MailMark { id: super::samples::bead_id(5), read: true }]
    }
}

impl NamespaceWrite for MailMark {
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        namespace.mail_mark(&self.id, self.read, context.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::MailMark;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::model::BeadId;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::MailMarkRequest, |request| Ok(MailMark { id: BeadId(request.id), read: request.read }.into()));

    impl ToWriteRequest for MailMark {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            Some(pb::MailMarkRequest { header: Some(header), id: self.id.0.clone(), read: self.read }.into())
        }
    }
}
