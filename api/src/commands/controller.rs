//! The leader's controller's actions (`node/src/leader/controller.rs` decides them): expiring
//! leases, collecting old closed wisps, closing finished convoys, firing due orders. Each is
//! fenced by the term it was decided in, and conditional on the state it judged, so applying it
//! twice is harmless. No client sends one: it has no RPC.

use serde::{Deserialize, Serialize};

use super::{ClusterWrite, WriteCommand};
use crate::auth::Role;
use crate::command::Proposal;
use crate::limits::EXPIRIES_PER_COMMAND_MAX;
use crate::model::{BeadId, Timestamp};
use crate::outcome::{Answer, Refusal};
use crate::state::State;

registered!(cluster_write 6 Controller);

/// An action of the leader's controller, fenced by the term it was decided in: refused when a
/// controller of a higher term has acted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Controller {
    /// The Raft term of the leader that decided the action.
    pub term: u64,
    /// What to do.
    pub action: ControllerAction,
}

/// What a leader's controller does, each conditional on the state it judged, so that applying it
/// twice is harmless. Stored in the log by its variant index: new variants go at the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerAction {
    /// Take up the controller's duties for this term: from now on, actions of lower terms are
    /// refused. A new leader proposes it before anything else.
    Begin,
    /// Expire a lease that is still the bead's current one, as last renewed at `renewed_at`.
    ExpireLease {
        /// The bead.
        id: BeadId,
        /// The lease ([`crate::model::Lease::id`]).
        lease_id: u64,
        /// The lease's renewal the leader judged past due ([`crate::model::Lease::renewed_at`]).
        renewed_at: u64,
    },
    /// Expire several leases of one namespace at once, each as [`ControllerAction::ExpireLease`]
    /// does (a lease no longer as judged is left alone), at most
    /// [`crate::limits::EXPIRIES_PER_COMMAND_MAX`].
    ExpireLeases {
        /// The leases, as judged.
        leases: Vec<JudgedLease>,
    },
    /// Remove closed wisps closed at least `older_than_ms` ago, at most
    /// [`crate::limits::PURGE_BEADS_MAX`] (the wisp GC).
    CollectWisps {
        /// The wisp TTL.
        older_than_ms: i64,
    },
    /// Close open, not owned convoys whose children are all closed.
    CheckConvoys,
    /// Fire an order whose trigger the leader judged due, having seen `seen_fired` firings:
    /// refused once the order fired since, or when the state finds it not due.
    FireOrder {
        /// The order.
        name: String,
        /// Its [`crate::order::OrderRuns::fired`] as judged.
        seen_fired: u64,
    },
    /// Raise the state's apply version from `from` to `to` (see [`crate::version`]): the leader
    /// proposes it once every member's build applies `to`. Refused once the version is no longer
    /// `from`, while it is pinned, or when `to` is not above it.
    SwitchApplyVersion {
        /// The apply version the leader judged current.
        from: u32,
        /// The version to apply from the next entry on.
        to: u32,
    },
    /// A consistency checkpoint: every replica takes a digest of its state as it applies it, and
    /// the leader compares the members' digests at its index. It changes nothing.
    Checkpoint,
}

/// A lease as the controller judged it past due: its bead, id and the renewal it saw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JudgedLease {
    /// The bead.
    pub id: BeadId,
    /// The lease ([`crate::model::Lease::id`]).
    pub lease_id: u64,
    /// Its renewal as judged ([`crate::model::Lease::renewed_at`]).
    pub renewed_at: u64,
}

impl ControllerAction {
    /// A short name for logs and checkers.
    pub fn name(&self) -> &'static str {
        match self {
            ControllerAction::Begin => "begin",
            ControllerAction::ExpireLease { .. } => "expire_lease",
            ControllerAction::ExpireLeases { .. } => "expire_leases",
            ControllerAction::CollectWisps { .. } => "collect_wisps",
            ControllerAction::CheckConvoys => "check_convoys",
            ControllerAction::FireOrder { .. } => "fire_order",
            ControllerAction::SwitchApplyVersion { .. } => "switch_apply_version",
            ControllerAction::Checkpoint => "checkpoint",
        }
    }
}

impl WriteCommand for Controller {
    const NAME: &'static str = "controller";
    const ROLE: Role = Role::Admin;

    fn validate(&self) -> Result<(), Refusal> {
        if let ControllerAction::ExpireLeases { leases } = &self.action
            && leases.len() > EXPIRIES_PER_COMMAND_MAX
        {
            return Err(Refusal::TooLarge {
                what: "a batch of lease expiries".into(),
                size: leases.len(),
                limit: EXPIRIES_PER_COMMAND_MAX,
            });
        }
        Ok(())
    }

    /// One per action, decided in term 9.
    fn samples() -> Vec<Controller> {
        use super::samples::bead_id;
        let actions = vec![
            ControllerAction::Begin,
            ControllerAction::ExpireLease { id: bead_id(1), lease_id: 41, renewed_at: 40 },
            ControllerAction::ExpireLeases {
                leases: vec![
                    JudgedLease { id: bead_id(1), lease_id: 41, renewed_at: 40 },
                    JudgedLease { id: bead_id(2), lease_id: 44, renewed_at: 44 },
                ],
            },
            ControllerAction::CollectWisps { older_than_ms: 3_600_000 },
            ControllerAction::CheckConvoys,
            ControllerAction::FireOrder { name: "nightly".into(), seen_fired: 3 },
            ControllerAction::SwitchApplyVersion { from: 1, to: 2 },
            ControllerAction::Checkpoint,
        ];
        actions.into_iter().map(|action| Controller { term: 9, action }).collect()
    }
}

impl ClusterWrite for Controller {
    fn apply(&self, state: &mut State, proposal: &Proposal, now: Timestamp) -> Answer {
        state.controller(&proposal.namespace, self.term, &self.action, now)
    }
}

/// No protobuf mapping: only a leader proposes a controller action.
mod wire {
    use super::Controller;
    use crate::convert::ToWriteRequest;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    impl ToWriteRequest for Controller {
        fn to_request(&self, _header: pb::WriteHeader) -> Option<ClientRpc> {
            None
        }
    }
}
