//! The token check: which commands and reads a token may send ([`Token::may_write`],
//! [`Token::may_read`], by the rules `crate::auth` describes), and the state's judgement of a
//! write or a read by the token its credential names ([`State::authorize_write`],
//! [`State::authorize_read`]). Each command's file names the role it needs and the actors it
//! acts for; these rules read them through [`Command`], so they live with the dispatch, above
//! the token data of `crate::auth` and the state's tokens.

use crate::auth::{Role, Token, TokenHash};
use crate::command::{Command, Query};
use crate::model::{Actor, Namespace};
use crate::outcome::Refusal;
use crate::printable::printable;
use crate::state::State;

impl Token {
    /// Whether this token may apply `command` in `namespace` acting as `actor`.
    pub fn may_write(&self, namespace: &Namespace, actor: &Actor, command: &Command) -> Result<(), Refusal> {
        match self.role {
            Role::Admin => Ok(()),
            Role::Reader => Err(Refusal::PermissionDenied(format!(
                "token {} has the reader role, which only reads; {} needs an agent or admin token",
                printable(&self.name),
                command.name()
            ))),
            Role::Agent => {
                // Commands only an admin may send reach beyond one agent's work (settings and
                // deletion of a namespace, purge, import, auth): each command's file names its role.
                if command.role() == Role::Admin {
                    return Err(Refusal::PermissionDenied(format!(
                        "token {} has the agent role; {} needs an admin token",
                        printable(&self.name),
                        command.name()
                    )));
                }
                if !self.covers(namespace) {
                    return Err(self.namespace_refusal(namespace));
                }
                let own = self.actor.0.as_str();
                // The first actor other than its own that the command claims or assigns a bead to, or
                // sends as, a transaction's writes included: an agent may name only itself there (an
                // empty assignee unassigns). It may still route work to others through `sling`, and
                // take a bead over by assigning it to itself, as bd allows.
                let other = if actor.0 != own { Some(actor.0.as_str()) } else { command.other_actor(own) };
                match other {
                    None => Ok(()),
                    Some(other) => Err(Refusal::PermissionDenied(format!(
                        "token {} acts only as {}, not as {}; name no actor (--actor, $STRAND_ACTOR, $BEADS_ACTOR, $GC_SESSION_NAME, $GC_AGENT), or name {}",
                        printable(&self.name),
                        printable(&self.actor.0),
                        printable(other),
                        printable(&self.actor.0)
                    ))),
                }
            }
        }
    }

    /// Whether this token may run `query` in `namespace`.
    pub fn may_read(&self, namespace: &Namespace, query: &Query) -> Result<(), Refusal> {
        match query {
            Query::Tokens if self.role != Role::Admin => Err(Refusal::PermissionDenied(format!(
                "token {} has the {} role; listing tokens needs an admin token",
                printable(&self.name),
                self.role
            ))),
            // Answered with only the namespaces the token covers (see `scope`).
            Query::Namespaces | Query::Tokens | Query::WhoAmI => Ok(()),
            _ if !self.covers(namespace) => Err(self.namespace_refusal(namespace)),
            _ => Ok(()),
        }
    }
}

impl State {
    /// Judges a write as [`State::apply`] will; answers the token that allowed it (`Ok(None)`:
    /// auth is off).
    pub fn authorize_write(
        &self,
        credential: Option<&TokenHash>,
        namespace: &Namespace,
        actor: &Actor,
        command: &Command,
    ) -> Result<Option<&Token>, Refusal> {
        let token = self.authenticate(credential)?;
        if let Some(token) = token {
            token.may_write(namespace, actor, command)?;
        }
        Ok(token)
    }

    /// Judges a read by the token its credential names; answers the token that allowed it
    /// (`Ok(None)`: auth is off).
    pub fn authorize_read(
        &self,
        credential: Option<&TokenHash>,
        namespace: &Namespace,
        query: &Query,
    ) -> Result<Option<&Token>, Refusal> {
        let token = self.authenticate(credential)?;
        if let Some(token) = token {
            token.may_read(namespace, query)?;
        }
        Ok(token)
    }
}

/// Fills every claimant `command` leaves empty with `actor` (a client that named no one acts as
/// its token's actor): each command's file says which of its fields are claimants.
pub fn fill_claimants(command: &mut Command, actor: &Actor) {
    command.fill_claimants(actor);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::TokenHash;
    use crate::model::Timestamp;

    fn token(role: Role, namespaces: &[&str]) -> Token {
        Token {
            name: "t".into(),
            hash: TokenHash::of("x"),
            role,
            namespaces: namespaces.iter().map(|name| Namespace(name.to_string())).collect(),
            actor: Actor("alice".into()),
            created_at: Timestamp(0),
        }
    }

    #[test]
    fn an_agent_acts_only_as_itself_in_its_namespaces() {
        let agent = token(Role::Agent, &["rig"]);
        let rig = Namespace("rig".into());
        let alice = Actor("alice".into());
        let claim = |actor: &str| {
            Command::Claim(crate::command::Claim { id: "st-1".into(), actor: Actor(actor.into()), lease_ms: None })
        };
        assert!(agent.may_write(&rig, &alice, &claim("alice")).is_ok());
        let refused = agent.may_write(&rig, &alice, &claim("bob")).unwrap_err();
        assert!(matches!(&refused, Refusal::PermissionDenied(message) if message.contains("not as bob")), "{refused}");
        assert!(agent.may_write(&rig, &Actor("bob".into()), &claim("alice")).is_err());
        let other = Namespace("other".into());
        assert!(matches!(agent.may_write(&other, &alice, &claim("alice")), Err(Refusal::PermissionDenied(_))));
        assert!(agent.may_write(&rig, &alice, &Command::Purge(crate::command::Purge { older_than_ms: 0 })).is_err());
        let txn = Command::Txn(crate::command::Txn { writes: vec![claim("bob")], ..Default::default() });
        assert!(agent.may_write(&rig, &alice, &txn).is_err());
        let mut filled = Command::Txn(crate::command::Txn { writes: vec![claim("")], ..Default::default() });
        fill_claimants(&mut filled, &alice);
        assert!(agent.may_write(&rig, &alice, &filled).is_ok());
        let assign = |assignee: &str| {
            Command::Update(crate::command::UpdateBead {
                id: "st-1".into(),
                assignee: Some(assignee.into()),
                ..Default::default()
            })
        };
        assert!(agent.may_write(&rig, &alice, &assign("alice")).is_ok());
        assert!(agent.may_write(&rig, &alice, &assign("")).is_ok(), "unassigning names no one");
        assert!(agent.may_write(&rig, &alice, &assign("bob")).is_err());
        let message = |from: &str| {
            Command::Create(crate::command::CreateBead { title: "hi".into(), from: from.into(), ..Default::default() })
        };
        assert!(agent.may_write(&rig, &alice, &message("alice")).is_ok());
        assert!(agent.may_write(&rig, &alice, &message("bob")).is_err(), "a message cannot be sent as another");
        assert!(agent.may_read(&rig, &Query::from(crate::commands::formula_list::FormulaList)).is_ok());
        assert!(agent.may_read(&other, &Query::from(crate::commands::formula_list::FormulaList)).is_err());
        assert!(agent.may_read(&rig, &Query::Tokens).is_err());
    }

    #[test]
    fn a_reader_only_reads_and_an_admin_does_anything() {
        let reader = token(Role::Reader, &[]);
        let namespace = Namespace("any".into());
        let alice = Actor("alice".into());
        assert!(matches!(
            reader.may_write(&namespace, &alice, &Command::Reopen(crate::command::Reopen { id: "st-1".into() })),
            Err(Refusal::PermissionDenied(_))
        ));
        assert!(reader.may_read(&namespace, &Query::from(crate::commands::formula_list::FormulaList)).is_ok());
        let admin = token(Role::Admin, &[]);
        assert!(
            admin
                .may_write(
                    &namespace,
                    &Actor("bob".into()),
                    &Command::Purge(crate::command::Purge { older_than_ms: 0 })
                )
                .is_ok()
        );
        assert!(admin.may_read(&namespace, &Query::Tokens).is_ok());
    }
}
