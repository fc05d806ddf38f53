//! `events` and `watch`: the events of a namespace after a sequence number, oldest first. A
//! `watch` stream (node/src/client/watch.rs) reads them with this query, in batches as large as
//! one answer may be.

use serde::{Deserialize, Serialize};

use super::ReadCommand;
use crate::model::{Namespace, event_type};
use crate::outcome::{Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 19 Events);

/// List the events after `after`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Events {
    /// Last sequence number already seen (0: from the start).
    pub after: u64,
    /// Only these types (empty: all).
    pub types: Vec<String>,
    /// At most this many (capped at [`crate::limits::EVENTS_PER_QUERY_MAX`]).
    pub limit: u32,
}

impl ReadCommand for Events {
    const NAME: &'static str = "events";

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        namespace.events_after(self.after, &self.types, self.limit)
    }
}

/// Checks event type filters against the known types, so a typo is refused instead of silently
/// matching nothing (the gRPC requests and the web console's events page).
pub fn known_types(types: Vec<String>) -> Result<Vec<String>, Refusal> {
    if let Some(unknown) = types.iter().find(|name| !event_type::ALL.contains(&name.as_str())) {
        let known = event_type::ALL.join(", ");
        return Err(Refusal::Invalid(format!("unknown event type {unknown:?}; use one of: {known}")));
    }
    Ok(types)
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::Events;
    use crate::convert::{ToReadRequest, read_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::EventsRequest, |request, _now| {
        Ok(Events { after: request.after, types: super::known_types(request.types)?, limit: request.limit }.into())
    });

    // A watch reads the log in batches as large as one answer may be.
    read_request!(pb::WatchRequest, |request, _now| {
        let limit = crate::limits::EVENTS_PER_QUERY_MAX;
        Ok(Events { after: request.after, types: super::known_types(request.types)?, limit }.into())
    });

    impl ToReadRequest for Events {
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            let (after, types, limit) = (self.after, self.types.clone(), self.limit);
            pb::EventsRequest { header: Some(header), after, types, limit }.into()
        }
    }
}
