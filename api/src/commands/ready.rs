//! `ready` (and the exec store's `ready`): the ready beads (docs/beads.md §4) matching a filter,
//! at the reader's time.

use serde::{Deserialize, Serialize};

use super::ReadCommand;
use crate::command::ReadyFilter;
use crate::model::{Namespace, Timestamp};
use crate::outcome::{Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 18 Ready);

/// List the ready beads matching a filter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ready {
    /// The filters.
    pub filter: ReadyFilter,
    /// The reader's clock, for `defer_until` (the node sets it; a client's is ignored).
    pub now: Timestamp,
}

impl ReadCommand for Ready {
    const NAME: &'static str = "ready";

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        namespace.ready(&self.filter, self.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::Ready;
    use crate::convert::{ToReadRequest, read_request, ready_filter, ready_filter_to_proto};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::ReadyRequest, |request, now| Ok(Ready { filter: ready_filter(request.filter)?, now }.into()));

    impl ToReadRequest for Ready {
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            pb::ReadyRequest { header: Some(header), filter: Some(ready_filter_to_proto(&self.filter)) }.into()
        }
    }
}
