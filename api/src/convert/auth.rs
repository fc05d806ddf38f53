//! Conversions of the `Auth` service: token specs and listings. A token itself never appears
//! here: a spec carries its SHA-256, a listing only a fingerprint of that.

use std::collections::BTreeSet;

use tonic::Status as GrpcStatus;

use super::{FromAnswer, IntoAnswer, invalid, refusal_to_status, unexpected};
use crate::auth::{Role, TokenHash, TokenInfo, TokenSpec};
use crate::command::Query;
use crate::model::{Actor, Namespace, Timestamp};
use crate::outcome::{Answer, Outcome, Refusal};
use crate::proto as pb;

fn hash_of(bytes: &[u8]) -> Result<TokenHash, Refusal> {
    let bytes: [u8; 32] = bytes.try_into().map_err(|_| {
        invalid(format!("a token's sha256 is 32 bytes, not {}; send the hash, never the token", bytes.len()))
    })?;
    Ok(TokenHash(bytes))
}

pub(crate) fn spec_of(spec: Option<pb::TokenSpec>) -> Result<TokenSpec, Refusal> {
    let spec = spec.ok_or_else(|| invalid("the request names no token; give its name, role and sha256".into()))?;
    Ok(TokenSpec {
        name: spec.name,
        hash: hash_of(&spec.sha256)?,
        role: Role::parse(&spec.role)?,
        namespaces: spec.namespaces.into_iter().map(Namespace).collect::<BTreeSet<_>>(),
        actor: (!spec.actor.is_empty()).then_some(Actor(spec.actor)),
    })
}

/// The protobuf form of a token spec, for clients.
pub(crate) fn spec_to_proto(spec: TokenSpec) -> pb::TokenSpec {
    pb::TokenSpec {
        name: spec.name,
        role: spec.role.name().to_string(),
        namespaces: spec.namespaces.into_iter().map(|namespace| namespace.0).collect(),
        actor: spec.actor.map(|actor| actor.0).unwrap_or_default(),
        sha256: spec.hash.0.to_vec(),
    }
}

read_request!(pb::TokenListRequest, |_request, _now| Ok(Query::Tokens));
read_request!(pb::WhoAmIRequest, |_request, _now| Ok(Query::WhoAmI));

impl From<&TokenInfo> for pb::TokenInfo {
    fn from(token: &TokenInfo) -> pb::TokenInfo {
        pb::TokenInfo {
            name: token.name.clone(),
            role: token.role.name().to_string(),
            namespaces: token.namespaces.iter().map(|namespace| namespace.0.clone()).collect(),
            actor: token.actor.0.clone(),
            created_at_ms: token.created_at.0,
            sha256_prefix: token.fingerprint.clone(),
        }
    }
}

impl FromAnswer for pb::AuthResponse {
    fn from_answer(answer: Answer) -> Result<Self, GrpcStatus> {
        match answer.map_err(refusal_to_status)? {
            Outcome::Tokens { enabled, tokens } => {
                Ok(pb::AuthResponse { enabled, tokens: tokens.iter().map(pb::TokenInfo::from).collect() })
            }
            other => Err(unexpected(&other)),
        }
    }
}

impl IntoAnswer for pb::AuthResponse {
    fn into_answer(self) -> Answer {
        let tokens = self
            .tokens
            .into_iter()
            .map(|info| {
                Ok(TokenInfo {
                    name: info.name,
                    role: Role::parse(&info.role)?,
                    namespaces: info.namespaces.into_iter().map(Namespace).collect(),
                    actor: Actor(info.actor),
                    created_at: Timestamp(info.created_at_ms),
                    fingerprint: info.sha256_prefix,
                })
            })
            .collect::<Result<_, Refusal>>()?;
        Ok(Outcome::Tokens { enabled: self.enabled, tokens })
    }
}
