//! `auth enable|disable` and `auth token create|revoke`: a change of the cluster's auth settings
//! or tokens; the proposal's namespace is ignored. [`AuthCommand`] itself, with the token model,
//! is in `crate::auth`, and `crate::state` keeps the tokens. An admin's command (`auth enable`
//! is sent while auth is off).

use super::{ClusterWrite, WriteCommand};
pub use crate::auth::AuthCommand;
use crate::auth::Role;
use crate::command::Proposal;
use crate::model::Timestamp;
use crate::outcome::{Answer, Refusal};
use crate::state::State;

registered!(cluster_write 35 Auth AuthCommand);

impl WriteCommand for AuthCommand {
    /// Its kind's name: each kind names itself (`name`).
    const NAME: &'static str = "auth";
    const ROLE: Role = Role::Admin;

    fn name(&self) -> &'static str {
        AuthCommand::name(self)
    }

    fn validate(&self) -> Result<(), Refusal> {
        match self {
            AuthCommand::Enable(spec) | AuthCommand::TokenCreate(spec) => crate::auth::validate_spec(spec),
            AuthCommand::TokenRevoke { name } => crate::validate::check_names(&[("token name", name)]),
            AuthCommand::Disable => Ok(()),
        }
    }

    /// One per kind.
    fn samples() -> Vec<AuthCommand> {
        use super::samples::token_spec;
        vec![
            AuthCommand::Enable(token_spec(Role::Admin)),
            AuthCommand::Disable,
            AuthCommand::TokenCreate(token_spec(Role::Agent)),
            AuthCommand::TokenRevoke { name: "ci".into() },
        ]
    }
}

impl ClusterWrite for AuthCommand {
    fn apply(&self, state: &mut State, _proposal: &Proposal, now: Timestamp) -> Answer {
        state.apply_auth(self, now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::AuthCommand;
    use crate::convert::auth::{spec_of, spec_to_proto};
    use crate::convert::{ToWriteRequest, write_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::AuthEnableRequest, |request| Ok(AuthCommand::Enable(spec_of(request.admin)?).into()));
    write_request!(pb::AuthDisableRequest, |_request| Ok(AuthCommand::Disable.into()));
    write_request!(pb::TokenCreateRequest, |request| Ok(AuthCommand::TokenCreate(spec_of(request.token)?).into()));
    write_request!(pb::TokenRevokeRequest, |request| Ok(AuthCommand::TokenRevoke { name: request.name }.into()));

    impl ToWriteRequest for AuthCommand {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let header = Some(header);
            Some(match self.clone() {
                AuthCommand::Enable(spec) => pb::AuthEnableRequest { header, admin: Some(spec_to_proto(spec)) }.into(),
                AuthCommand::Disable => pb::AuthDisableRequest { header }.into(),
                AuthCommand::TokenCreate(spec) => {
                    pb::TokenCreateRequest { header, token: Some(spec_to_proto(spec)) }.into()
                }
                AuthCommand::TokenRevoke { name } => pb::TokenRevokeRequest { header, name }.into(),
            })
        }
    }
}
