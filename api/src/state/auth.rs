//! The replicated auth settings: whether auth is enabled, and the tokens by name and by hash.
//!
//! Every write is judged by the token its credential names ([`AuthState::authenticate`]) when it
//! is applied (`State::authorize_write`, in the dispatch above the state), so a write applied
//! after a revocation is refused on every replica alike, whatever a node believed when it took
//! the request. Reads are judged by the node against its replica after the read index
//! (`node::client`), which has applied every revocation committed before the read began.
//!
//! Invariant: a token's hash names at most one token.

use std::collections::{BTreeMap, BTreeSet};

use crate::auth::{AuthCommand, Role, TOKENS_MAX, Token, TokenHash, TokenInfo, TokenSpec};
use crate::model::{Actor, Timestamp};
use crate::outcome::{Answer, Outcome, Refusal};
use crate::printable::printable;

/// Logs an applied auth change on the `strand::audit` target, at info: the revision, the token
/// that made it (`None`: auth was off, as for `auth enable`), the actor it named, and what
/// changed (a token by name, role, rights and hash fingerprint, never the hash). Every replica
/// logs each change it applies; a refused change, a retry answered from the dedup table and a
/// disable while auth is off are not logged. A node that restarts may apply its last entries,
/// and log their changes, again.
pub(crate) fn audit(revision: u64, by: Option<&str>, actor: &Actor, command: &AuthCommand) {
    let by = by.map_or_else(|| "(none: auth was off)".to_string(), |name| printable(name).to_string());
    let actor = printable(&actor.0).to_string();
    let spec_fields = |spec: &TokenSpec| {
        let namespaces: Vec<String> =
            spec.namespaces.iter().map(|namespace| printable(&namespace.0).to_string()).collect();
        let token_actor = spec
            .actor
            .as_ref()
            .map_or_else(|| printable(&spec.name).to_string(), |actor| printable(&actor.0).to_string());
        (printable(&spec.name).to_string(), namespaces.join(","), token_actor, spec.hash.fingerprint())
    };
    match command {
        AuthCommand::Enable(spec) => {
            let (token, _, _, sha256_prefix) = spec_fields(spec);
            tracing::info!(target: "strand::audit", revision, by, actor, token, sha256_prefix, "auth enabled with a first admin token");
        }
        AuthCommand::Disable => tracing::info!(target: "strand::audit", revision, by, actor, "auth disabled"),
        AuthCommand::TokenCreate(spec) => {
            let (token, namespaces, token_actor, sha256_prefix) = spec_fields(spec);
            let role = spec.role.name();
            tracing::info!(target: "strand::audit", revision, by, actor, token, role, namespaces, token_actor, sha256_prefix, "token created");
        }
        AuthCommand::TokenRevoke { name } => {
            let token = printable(name).to_string();
            tracing::info!(target: "strand::audit", revision, by, actor, token, "token revoked");
        }
    }
}

/// Auth as the state keeps it, with what changed since the last batch.
#[derive(Clone, Debug, Default)]
pub(crate) struct AuthState {
    pub(crate) enabled: bool,
    pub(crate) tokens: BTreeMap<String, Token>,
    by_hash: BTreeMap<TokenHash, String>,
    pub(crate) enabled_dirty: bool,
    /// Tokens added or removed since the last batch.
    pub(crate) dirty_tokens: BTreeSet<String>,
}

impl AuthState {
    /// Adds a token read from disk.
    pub(crate) fn load(&mut self, token: Token) {
        self.by_hash.insert(token.hash, token.name.clone());
        self.tokens.insert(token.name.clone(), token);
    }

    /// The token a request's credential names. `Ok(None)`: auth is off, anyone may do anything.
    pub(crate) fn authenticate(&self, credential: Option<&TokenHash>) -> Result<Option<&Token>, Refusal> {
        if !self.enabled {
            return Ok(None);
        }
        let Some(hash) = credential else {
            return Err(Refusal::Unauthenticated(
                "this cluster requires a token: pass --token or set $STRAND_TOKEN (an admin makes one with `strand auth token create`)".into(),
            ));
        };
        match self.by_hash.get(hash).and_then(|name| self.tokens.get(name)) {
            Some(token) => Ok(Some(token)),
            None => Err(Refusal::Unauthenticated(
                "the token is not known to this cluster (revoked, or made for another cluster); ask an admin for a new one (`strand auth token create`)".into(),
            )),
        }
    }

    /// Whether `command`, if it is not refused, changes auth: all but a disable while auth is off.
    pub(crate) fn changes(&self, command: &AuthCommand) -> bool {
        self.enabled || !matches!(command, AuthCommand::Disable)
    }

    /// Every token, by name (`Query::Tokens`).
    pub(crate) fn listing(&self) -> Outcome {
        Outcome::Tokens { enabled: self.enabled, tokens: self.tokens.values().map(TokenInfo::from).collect() }
    }

    /// Applies an auth command, already authorized and validated.
    pub(crate) fn apply(&mut self, command: &AuthCommand, now: Timestamp) -> Answer {
        match command {
            AuthCommand::Enable(spec) => {
                if self.enabled {
                    return Err(Refusal::Invalid(
                        "auth is already enabled; make more tokens with `strand auth token create`".into(),
                    ));
                }
                if spec.role != Role::Admin {
                    return Err(Refusal::Invalid(format!(
                        "the first token must be an admin's, not {}; enable auth with an admin token",
                        spec.role
                    )));
                }
                self.add(spec, now)?;
                self.enabled = true;
                self.enabled_dirty = true;
            }
            AuthCommand::Disable => {
                if self.enabled {
                    self.enabled = false;
                    self.enabled_dirty = true;
                }
            }
            AuthCommand::TokenCreate(spec) => self.add(spec, now)?,
            AuthCommand::TokenRevoke { name } => {
                let Some(token) = self.tokens.get(name) else {
                    return Err(Refusal::Invalid(format!(
                        "no token is named {}; see `strand auth token list`",
                        printable(name)
                    )));
                };
                if self.enabled && token.role == Role::Admin && self.admins() == 1 {
                    return Err(Refusal::Invalid(format!(
                        "token {} is the last admin token; make another admin token first, or run `strand auth disable`",
                        printable(name)
                    )));
                }
                let token = self.tokens.remove(name).expect("found above");
                self.by_hash.remove(&token.hash);
                self.dirty_tokens.insert(token.name);
            }
        }
        Ok(self.listing())
    }

    fn admins(&self) -> usize {
        self.tokens.values().filter(|token| token.role == Role::Admin).count()
    }

    fn add(&mut self, spec: &TokenSpec, now: Timestamp) -> Result<(), Refusal> {
        if self.tokens.contains_key(&spec.name) {
            return Err(Refusal::Invalid(format!(
                "a token named {} exists; pick another name, or revoke it first (`strand auth token revoke`)",
                printable(&spec.name)
            )));
        }
        if self.by_hash.contains_key(&spec.hash) {
            return Err(Refusal::Invalid("a token with this hash exists; draw a new token".into()));
        }
        if self.tokens.len() >= TOKENS_MAX {
            return Err(Refusal::Invalid(format!(
                "the cluster holds {TOKENS_MAX} tokens, the most it may; revoke some"
            )));
        }
        let token = Token::from_spec(spec, now);
        self.dirty_tokens.insert(token.name.clone());
        self.load(token);
        Ok(())
    }
}
