//! `mail thread ID`: every message of a thread, oldest first.

use serde::{Deserialize, Serialize};

use super::ReadCommand;
use crate::model::Namespace;
use crate::outcome::{Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 6 Thread);

/// List the messages of a thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thread {
    /// The thread's id.
    pub thread: String,
}

impl ReadCommand for Thread {
    const NAME: &'static str = "thread";

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        namespace.thread(&self.thread)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::Thread;
    use crate::convert::{ToReadRequest, read_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::ThreadRequest, |request, _now| Ok(Thread { thread: request.thread }.into()));

    impl ToReadRequest for Thread {
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            pb::ThreadRequest { header: Some(header), thread: self.thread.clone() }.into()
        }
    }
}
