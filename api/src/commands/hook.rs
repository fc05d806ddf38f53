//! `hook AGENT`: an agent's work queue (docs/beads.md §7): its in-progress beads first, then the
//! ready beads assigned to it, then the ready beads routed to its pool.

use serde::{Deserialize, Serialize};

use super::ReadCommand;
use crate::model::{Namespace, Timestamp};
use crate::outcome::{Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 10 Hook);

/// Show an agent's work queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hook {
    /// The agent.
    pub agent: String,
    /// Its pool.
    pub pool: Option<String>,
    /// At most this many.
    pub limit: u32,
    /// The reader's clock, for `defer_until` (the node sets it; a client's is ignored).
    pub now: Timestamp,
}

impl ReadCommand for Hook {
    const NAME: &'static str = "hook";

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        namespace.hook(&self.agent, self.pool.as_deref(), self.limit, self.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::Hook;
    use crate::convert::{ToReadRequest, read_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::HookRequest, |request, now| {
        let pool = (!request.pool.is_empty()).then_some(request.pool);
        Ok(Hook { agent: request.agent, pool, limit: request.limit, now }.into())
    });

    impl ToReadRequest for Hook {
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            let (agent, pool) = (self.agent.clone(), self.pool.clone().unwrap_or_default());
            pb::HookRequest { header: Some(header), agent, pool, limit: self.limit }.into()
        }
    }
}
