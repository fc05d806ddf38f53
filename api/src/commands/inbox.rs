//! `mail inbox`: the open messages of a recipient, newest first; unread ones only unless asked.

use serde::{Deserialize, Serialize};

use super::ReadCommand;
use crate::model::Namespace;
use crate::outcome::{Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 11 Inbox);

/// List a recipient's messages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inbox {
    /// The recipient.
    pub recipient: String,
    /// Include messages already read.
    pub include_read: bool,
    /// At most this many (0: unlimited).
    pub limit: u32,
}

impl ReadCommand for Inbox {
    const NAME: &'static str = "inbox";

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        namespace.inbox(&self.recipient, self.include_read, self.limit)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::Inbox;
    use crate::convert::{ToReadRequest, read_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::InboxRequest, |request, _now| {
        Ok(Inbox { recipient: request.recipient, include_read: request.include_read, limit: request.limit }.into())
    });

    impl ToReadRequest for Inbox {
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            let (recipient, include_read, limit) = (self.recipient.clone(), self.include_read, self.limit);
            pb::InboxRequest { header: Some(header), recipient, include_read, limit }.into()
        }
    }
}
