//! Who may do what once auth is enabled: bearer tokens, their roles, and the rules every write
//! and read is judged by.
//!
//! A token is 256 random bits, written `strand_` and 64 hex digits (drawn by the client,
//! [`crate::client::generate_token`]). The cluster never holds a token, only its SHA-256 ([`TokenHash`]): the CLI draws the token, sends its hash
//! in `auth enable` or `auth token create`, and prints the token once. A client sends the token
//! as `authorization: Bearer <token>` with every call; the node hashes it and looks the hash up
//! in the replicated state (`state::auth`).
//!
//! Roles ([`Role`], defined with the token listing [`TokenInfo`] in `crate::outcome`, below this
//! module, and re-exported here): an admin may do everything and act as any actor; an agent may
//! use the bead and orchestration commands in its namespaces, always as its own actor; a reader
//! may only read (watch included) in its namespaces. The rules are pure functions of the token and the request
//! ([`Token::may_write`], [`Token::may_read`]), so the state machine can apply them to a write at
//! apply time, deterministically, on every replica. They read the command, so they are written
//! with the dispatch (`crate::commands`'s `authorize.rs`); this module holds the token data and
//! knows no command.
//!
//! Invariant: no token, and nothing from which one could be recovered, is ever stored, logged or
//! answered; only hashes.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::model::{Actor, Namespace, Timestamp};
use crate::outcome::{Outcome, Refusal};
pub use crate::outcome::{Role, TokenInfo};
use crate::printable::{hex, printable};

/// How every token begins.
pub const TOKEN_PREFIX: &str = "strand_";
/// Hex digits after the prefix: 256 random bits.
pub const TOKEN_HEX_DIGITS: usize = 64;
/// Longest token name, in bytes.
pub const TOKEN_NAME_BYTES_MAX: usize = 128;
/// Most namespaces one token may be limited to.
pub const TOKEN_NAMESPACES_MAX: usize = 64;
/// Most tokens a cluster holds.
pub const TOKENS_MAX: usize = 10_000;
/// The gRPC metadata key a token travels in.
pub const AUTHORIZATION_HEADER: &str = "authorization";

/// The SHA-256 of a token: what the cluster stores and looks tokens up by.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TokenHash(pub [u8; 32]);

impl TokenHash {
    /// The hash of `token`, as the node computes it from a request.
    pub fn of(token: &str) -> TokenHash {
        TokenHash(Sha256::digest(token.as_bytes()).into())
    }

    /// The first 12 hex digits: enough to tell tokens apart in a listing, useless to an attacker.
    pub fn fingerprint(&self) -> String {
        hex(&self.0[..6])
    }
}

impl fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenHash({})", self.fingerprint())
    }
}

/// Whether `token` is written as [`crate::client::generate_token`] writes tokens.
pub fn is_well_formed(token: &str) -> bool {
    token
        .strip_prefix(TOKEN_PREFIX)
        .is_some_and(|digits| digits.len() == TOKEN_HEX_DIGITS && digits.bytes().all(|byte| byte.is_ascii_hexdigit()))
}

/// The hash of the token in an `authorization` header's value (`Bearer <token>`).
pub fn parse_bearer(value: &[u8]) -> Result<TokenHash, Refusal> {
    let malformed = || {
        Refusal::Unauthenticated(format!(
            "the authorization header is not `Bearer {TOKEN_PREFIX}…`; pass the token `strand auth token create` printed (--token or $STRAND_TOKEN)"
        ))
    };
    let value = std::str::from_utf8(value).map_err(|_| malformed())?;
    let (scheme, token) = value.trim().split_once(' ').ok_or_else(malformed)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || !is_well_formed(token) {
        return Err(malformed());
    }
    Ok(TokenHash::of(token))
}

/// A token as the cluster keeps it: its name, hash and rights.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Token {
    /// Unique among the cluster's tokens.
    pub name: String,
    /// The SHA-256 of the token.
    pub hash: TokenHash,
    /// What it may do.
    pub role: Role,
    /// The namespaces it may use; empty: every namespace.
    pub namespaces: BTreeSet<Namespace>,
    /// Who its requests act as when they name no one; an agent's writes may name no one else.
    pub actor: Actor,
    /// When it was made (the state's clock).
    pub created_at: Timestamp,
}

impl From<&Token> for TokenInfo {
    fn from(token: &Token) -> TokenInfo {
        TokenInfo {
            name: token.name.clone(),
            role: token.role,
            namespaces: token.namespaces.clone(),
            actor: token.actor.clone(),
            created_at: token.created_at,
            fingerprint: token.hash.fingerprint(),
        }
    }
}

/// A token to add, as `auth enable` and `auth token create` send it (the hash, never the token).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenSpec {
    /// The token's name.
    pub name: String,
    /// The SHA-256 of the token.
    pub hash: TokenHash,
    /// Its role.
    pub role: Role,
    /// The namespaces it may use; empty: every namespace.
    pub namespaces: BTreeSet<Namespace>,
    /// Its actor; `None`: its name.
    pub actor: Option<Actor>,
}

/// A change of the cluster's auth settings; every one but `Enable` needs an admin token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuthCommand {
    /// Turn auth on with a first token, which must be an admin's; refused while auth is on.
    Enable(TokenSpec),
    /// Turn auth off; the tokens stay, and work again once auth is enabled again.
    Disable,
    /// Add a token.
    TokenCreate(TokenSpec),
    /// Remove a token: it stops working with the next request applied or read after this.
    TokenRevoke {
        /// The token's name.
        name: String,
    },
}

impl AuthCommand {
    /// The command's name, for messages and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            AuthCommand::Enable(_) => "auth_enable",
            AuthCommand::Disable => "auth_disable",
            AuthCommand::TokenCreate(_) => "token_create",
            AuthCommand::TokenRevoke { .. } => "token_revoke",
        }
    }
}

/// Checks a token spec's fields: a printable name of at most [`TOKEN_NAME_BYTES_MAX`] bytes, at
/// most [`TOKEN_NAMESPACES_MAX`] namespaces, and an actor only where it can be honoured.
pub fn validate_spec(spec: &TokenSpec) -> Result<(), Refusal> {
    let name = &spec.name;
    if name.is_empty() || name.len() > TOKEN_NAME_BYTES_MAX {
        return Err(Refusal::Invalid(format!(
            "a token name must be 1 to {TOKEN_NAME_BYTES_MAX} bytes, not {}",
            name.len()
        )));
    }
    if name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(Refusal::Invalid(format!(
            "token name {:?} holds whitespace or control characters; use letters, digits, '-', '_', '.', '@'",
            printable(name)
        )));
    }
    if spec.namespaces.len() > TOKEN_NAMESPACES_MAX {
        return Err(Refusal::Invalid(format!(
            "a token may name at most {TOKEN_NAMESPACES_MAX} namespaces, not {}",
            spec.namespaces.len()
        )));
    }
    for namespace in &spec.namespaces {
        crate::validate::validate_namespace(namespace)?;
    }
    if let Some(actor) = &spec.actor {
        crate::validate::check_actor(&actor.0, "a token's --actor")?;
    }
    if spec.role == Role::Admin && !spec.namespaces.is_empty() {
        return Err(Refusal::Invalid(
            "an admin token reaches every namespace; drop --namespace, or make an agent or reader token".into(),
        ));
    }
    Ok(())
}

impl Token {
    /// The token a spec makes at `now`.
    pub fn from_spec(spec: &TokenSpec, now: Timestamp) -> Token {
        Token {
            name: spec.name.clone(),
            hash: spec.hash,
            role: spec.role,
            namespaces: spec.namespaces.clone(),
            actor: spec.actor.clone().unwrap_or_else(|| Actor(spec.name.clone())),
            created_at: now,
        }
    }

    /// Whether it may use `namespace`.
    pub fn covers(&self, namespace: &Namespace) -> bool {
        self.namespaces.is_empty() || self.namespaces.contains(namespace)
    }

    /// The refusal of a request in `namespace`, which this token does not cover.
    pub(crate) fn namespace_refusal(&self, namespace: &Namespace) -> Refusal {
        let allowed: Vec<&str> = self.namespaces.iter().map(|namespace| namespace.0.as_str()).collect();
        Refusal::PermissionDenied(format!(
            "token {} may use only namespace(s) {}, not {}; ask an admin for a token of that namespace",
            printable(&self.name),
            printable(&allowed.join(", ")),
            printable(&namespace.0)
        ))
    }

    /// An answer cut down to what this token may see: a namespace listing keeps only the
    /// namespaces it covers.
    pub fn scope(&self, outcome: Outcome) -> Outcome {
        match outcome {
            Outcome::Namespaces(infos) if !self.namespaces.is_empty() => Outcome::Namespaces(
                infos.into_iter().filter(|info| self.namespaces.contains(&Namespace(info.name.clone()))).collect(),
            ),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_formed_tokens_parse_and_others_do_not() {
        let generated = format!("{TOKEN_PREFIX}{}", "a5".repeat(TOKEN_HEX_DIGITS / 2));
        assert!(is_well_formed(&generated), "{generated}");
        let hash = parse_bearer(format!("Bearer {generated}").as_bytes()).expect("parses");
        assert_eq!(hash, TokenHash::of(&generated));
        assert_eq!(parse_bearer(format!("bearer  {generated} ").as_bytes()).expect("parses"), hash);
        for bad in ["", "Bearer", "Basic abc", &format!("Bearer {}", &generated[..20]), "Bearer strand_zz"] {
            assert!(matches!(parse_bearer(bad.as_bytes()), Err(Refusal::Unauthenticated(_))), "{bad:?}");
        }
        assert!(!format!("{hash:?}").contains(&generated[7..]), "Debug shows only a fingerprint");
    }
}
