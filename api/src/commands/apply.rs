//! The dispatch of the state machine: how [`State`] applies a [`Proposal`] and answers a
//! [`Query`]. This is the layer above the state (as mini-redis's `cmd` uses its `Db`, never the
//! reverse): `crate::state` offers its primitives (the entry's clock and revision, the dedup
//! table, the token a credential names, a namespace to write or read, the events to settle), and
//! this file strings them together, judging each command by its token (`authorize.rs`) and
//! handing it to its own file (`crate::commands`) to apply. Nothing here keeps state of its own.
//!
//! Invariant: the steps of [`State::apply`] run in this order, on every replica alike: the
//! revision, the clock and the eviction of expired sessions, the token check (not for the controller's actions), the dedup table,
//! the command's validation and application, the audit of an auth change, the events, the dedup
//! table's record. A refused command changes nothing but the dedup table and the clock.

use crate::auth::TokenHash;
use crate::command::validate_command;
use crate::command::{Command, Proposal, Query};
use crate::commands::WriteCommand;
use crate::commands::controller::Controller;
use crate::input::ControllerAction;
use crate::model::{Namespace, Timestamp};
use crate::outcome::{Answer, Outcome, Refusal};
use crate::state::{NamespaceState, State};
use crate::validate::validate_actor;

impl State {
    /// Applies one proposal from the log and answers it. `revision` is the proposal's Raft log
    /// index: every bead the command changes takes it as its revision.
    pub fn apply(&mut self, revision: u64, proposal: &Proposal) -> Answer {
        let now = self.begin_entry(revision, proposal.timestamp);
        // Judged before the dedup table: a retry of a request is refused once its token is
        // revoked, like any later request. An auth refusal is not recorded for the session.
        // An auth change is logged with the token that made it (`state::audit`), named before the
        // change, which may revoke that very token.
        let mut changed_by = None;
        if !matches!(proposal.command, Command::Controller(_)) {
            let token = self.authorize_write(
                proposal.credential.as_ref(),
                &proposal.namespace,
                &proposal.actor,
                &proposal.command,
            )?;
            if let Command::Auth(command) = &proposal.command
                && self.auth_changes(command)
            {
                changed_by = Some(token.map(|token| token.name.clone()));
            }
        }
        if let Some(request_id) = &proposal.request_id
            && let Some(answer) = self.answered(request_id)
        {
            return answer;
        }
        let answer = self.apply_command(proposal, now);
        if let (Some(by), Ok(_), Command::Auth(command)) = (changed_by, &answer, &proposal.command) {
            crate::state::audit(revision, by.as_deref(), &proposal.actor, command);
        }
        self.settle_events(&proposal.namespace, answer.is_ok(), now, &proposal.actor, proposal.event_retention);
        if let Some(request_id) = &proposal.request_id {
            self.record_answer(request_id, now, &answer);
        }
        answer
    }

    fn apply_command(&mut self, proposal: &Proposal, now: Timestamp) -> Answer {
        // The actor is recorded in the command's events. Refusing one with a control character
        // is a rule of apply version 1: builds from before apply versions, which did not refuse
        // it, are kept out of a cluster (see `crate::version`).
        validate_actor(&proposal.actor)?;
        validate_command(&proposal.command)?;
        let create_title = match &proposal.command {
            Command::Create(create) => Some(create.title.as_str()),
            _ => None,
        };
        self.canary_next(create_title)?;
        // Each command's file says how it applies: to its namespace, or to the whole state.
        self.apply_to_namespace(&proposal.namespace, |state| proposal.command.apply(state, proposal, now))
    }

    /// The namespace `proposal`'s write goes to ([`State::namespace_for_write`]), created on first
    /// use when the proposal may create it.
    pub(crate) fn namespace_of(&mut self, proposal: &Proposal) -> Result<&mut NamespaceState, Refusal> {
        self.namespace_for_write(
            &proposal.namespace,
            &proposal.default_prefix,
            proposal.may_create_namespace(),
            proposal.credential.as_ref(),
        )
    }

    /// The apply version an entry would leave the state at, when it changes it (a switch or a
    /// `cluster version set` that would apply): the storage layer stops at an entry whose version
    /// its build cannot apply, before applying it.
    pub fn version_after(&self, proposal: &Proposal) -> Option<u32> {
        let current = self.apply_version();
        let changed = match &proposal.command {
            Command::Controller(Controller { term, action: ControllerAction::SwitchApplyVersion { from, to } })
                if *term >= self.controller_term() =>
            {
                self.switched(*from, *to)
            }
            Command::ApplyVersion(change) => WriteCommand::validate(change).and_then(|()| change.changed(current, 0)),
            _ => return None,
        };
        changed.ok().map(|changed| changed.version).filter(|version| *version != current.version)
    }

    /// Answers a read. A namespace never written to reads as empty.
    pub fn query(&self, namespace: &Namespace, query: &Query) -> Answer {
        match query {
            Query::Namespaces => Ok(self.namespace_listing()),
            Query::Tokens => Ok(self.token_listing()),
            Query::WhoAmI => Ok(Outcome::Tokens { enabled: self.auth_enabled(), tokens: Vec::new() }),
            Query::Registered(query) => {
                self.read_namespace(namespace, |namespace_state| query.read(namespace, namespace_state))
            }
        }
    }

    /// Answers a read made with `credential`: judged by its token (refused when auth is on and
    /// the token may not make it), cut down to what the token may see, and `WhoAmI` answered
    /// with the token itself.
    /// With `must_exist`, a read of a namespace that does not exist is refused
    /// (`Refusal::NamespaceNotFound`) instead of answered as empty.
    pub fn query_as(
        &self,
        credential: Option<&TokenHash>,
        namespace: &Namespace,
        must_exist: bool,
        query: &Query,
    ) -> Answer {
        let token = self.authorize_read(credential, namespace, query)?;
        let must_exist = must_exist || matches!(query, Query::Registered(read) if read.must_exist());
        if must_exist && !matches!(query, Query::Namespaces | Query::Tokens | Query::WhoAmI) {
            self.require_namespace(credential, namespace)?;
        }
        if let Query::WhoAmI = query {
            let tokens = token.map(crate::auth::TokenInfo::from).into_iter().collect();
            return Ok(Outcome::Tokens { enabled: self.auth_enabled(), tokens });
        }
        let outcome = self.query(namespace, query)?;
        Ok(match token {
            Some(token) => token.scope(outcome),
            None => outcome,
        })
    }
}
