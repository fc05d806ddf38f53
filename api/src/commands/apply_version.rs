//! `cluster version pin|unpin|set N`: hold the apply version where it is, let it rise again, or
//! lower it (see [`crate::version`]). The proposal's namespace is ignored. An admin's command.
//! The leader refuses `set N` before proposing it when a member's build cannot apply `N`; the
//! state refuses a `set` above the current version (the leader raises it itself).

use serde::{Deserialize, Serialize};

use super::{ClusterWrite, WriteCommand};
use crate::auth::Role;
use crate::command::Proposal;
use crate::model::Timestamp;
use crate::outcome::{Answer, Outcome, Refusal};
use crate::state::{ApplyVersionRecord, State};
use crate::version::FIRST_APPLY_VERSION;

registered!(cluster_write 37 ApplyVersion ApplyVersionChange);

/// A change of the apply version or its pin.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ApplyVersionChange {
    /// Hold the version where it is: the leader does not raise it.
    Pin,
    /// Let the leader raise it again once every member applies a higher one.
    Unpin,
    /// Lower the version to `to` and pin it there (before a downgrade).
    Set {
        /// The version to apply from the next entry on.
        to: u32,
    },
}

impl WriteCommand for ApplyVersionChange {
    /// Its kind's name: each kind names itself (`name`).
    const NAME: &'static str = "apply_version";
    const ROLE: Role = Role::Admin;

    fn name(&self) -> &'static str {
        match self {
            ApplyVersionChange::Pin => "apply_version_pin",
            ApplyVersionChange::Unpin => "apply_version_unpin",
            ApplyVersionChange::Set { .. } => "apply_version_set",
        }
    }

    fn validate(&self) -> Result<(), Refusal> {
        match self {
            ApplyVersionChange::Set { to } if *to < FIRST_APPLY_VERSION => Err(Refusal::Invalid(format!(
                "apply version {to} does not exist: versions start at {FIRST_APPLY_VERSION}"
            ))),
            _ => Ok(()),
        }
    }

    /// One per kind.
    fn samples() -> Vec<ApplyVersionChange> {
        vec![ApplyVersionChange::Pin, ApplyVersionChange::Unpin, ApplyVersionChange::Set { to: 1 }]
    }
}

impl ApplyVersionChange {
    /// The apply version record this change leaves `current` at, the entry being at log index
    /// `revision`, or why it is refused. Applying it and predicting it (`State::version_after`)
    /// both read this.
    pub(crate) fn changed(&self, current: ApplyVersionRecord, revision: u64) -> Result<ApplyVersionRecord, Refusal> {
        Ok(match self {
            ApplyVersionChange::Pin => ApplyVersionRecord { pinned: true, ..current },
            ApplyVersionChange::Unpin => ApplyVersionRecord { pinned: false, ..current },
            ApplyVersionChange::Set { to } if *to > current.version => {
                return Err(Refusal::Invalid(format!(
                    "the apply version is {} and `set` only lowers it; the leader raises it itself once every member's build applies {to} (see `strand cluster version`)",
                    current.version
                )));
            }
            ApplyVersionChange::Set { to } if *to == current.version => ApplyVersionRecord { pinned: true, ..current },
            ApplyVersionChange::Set { to } => ApplyVersionRecord { version: *to, pinned: true, since: revision },
        })
    }
}

impl ClusterWrite for ApplyVersionChange {
    fn apply(&self, state: &mut State, _proposal: &Proposal, _now: Timestamp) -> Answer {
        let changed = self.changed(state.apply_version(), state.revision())?;
        state.change_apply_version(changed);
        Ok(Outcome::Done)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::ApplyVersionChange;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::ApplyVersionPinRequest, |_request| Ok(ApplyVersionChange::Pin.into()));
    write_request!(pb::ApplyVersionUnpinRequest, |_request| Ok(ApplyVersionChange::Unpin.into()));
    write_request!(pb::ApplyVersionSetRequest, |request| Ok(ApplyVersionChange::Set { to: request.version }.into()));

    impl ToWriteRequest for ApplyVersionChange {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let header = Some(header);
            Some(match self {
                ApplyVersionChange::Pin => pb::ApplyVersionPinRequest { header }.into(),
                ApplyVersionChange::Unpin => pb::ApplyVersionUnpinRequest { header }.into(),
                ApplyVersionChange::Set { to } => pb::ApplyVersionSetRequest { header, version: *to }.into(),
            })
        }
    }
}
