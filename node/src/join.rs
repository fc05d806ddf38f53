//! `strand node --join ADDR[,ADDR]`: a node added to a running cluster asks a member to add it.
//!
//! On an empty data directory, before Raft starts, the node sends `Raft.Join` to the peer
//! listener of each address in turn (with TLS, over mutual TLS with its own certificate, which
//! must name its id; with auth on, with the admin token given as `--token`). The member checks
//! the cluster name, the certificate and the token, and has the leader add the node as a learner
//! (see `leader::membership`). The answer carries the cluster id and the membership that holds
//! the node, which it records in its data directory (`crate::standing`) before it serves
//! anything; it then catches up from the leader as a learner (by snapshot when far behind), and
//! the leader promotes it once it stayed caught up, unless `--no-auto-promote`.
//!
//! A refusal that asking again cannot change (another cluster's name, a certificate of another
//! node, no admin token, an id or address in use) stops the node with the reason; no answer, no
//! leader, or a change in progress is asked again until the node is stopped.
//!
//! Invariant: a joining node never initialises a cluster, and records the cluster id only from a
//! member's answer.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use api::proto::raft_client::RaftClient;
use raft_store::types::Member;

use crate::config::NodeConfig;
use crate::peer::network::{Connector, PEER_MESSAGE_BYTES_MAX, decode, encode};
use crate::peer::{ChangeRefused, JoinRequest, Joined};

/// How long one join request may take (the leader adds the learner through Raft first).
pub const JOIN_TIMEOUT: Duration = Duration::from_secs(30);
/// The wait between two rounds of asking.
pub const ASK_AGAIN_AFTER: Duration = Duration::from_secs(1);

/// Asks the members at `config.join` until one adds this node; `Ok(None)` when `shutdown`
/// resolved first, `Err` for a refusal that asking again cannot change.
pub async fn join(
    connector: &dyn Connector,
    config: &NodeConfig,
    shutdown: &mut Pin<Box<dyn Future<Output = ()> + Send>>,
) -> Result<Option<Joined>, String> {
    let request = JoinRequest {
        cluster_name: config.cluster_name.clone(),
        id: config.id,
        member: Member {
            addr: config.advertised_peer(),
            client_addr: config.advertised_client(),
            auto_promote: config.auto_promote,
        },
    };
    tracing::info!(node = config.id, members = ?config.join, "joining the cluster: asking a member to add this node");
    let mut round = 0u64;
    loop {
        for address in &config.join {
            let asked = tokio::select! {
                () = &mut *shutdown => return Ok(None),
                asked = ask(connector, address, &request, config.join_token.as_deref()) => asked,
            };
            match asked {
                Ok(joined) => {
                    tracing::info!(
                        node = config.id,
                        cluster_id = format!("{:016x}", joined.cluster_id),
                        index = joined.membership.index,
                        leader = joined.membership.leader,
                        "joined the cluster as a learner"
                    );
                    return Ok(Some(joined));
                }
                Err(Asked::Refused(refused)) => {
                    return Err(format!("node {} could not join through {address}: {refused}", config.id));
                }
                Err(Asked::Again(reason)) => {
                    if round.is_multiple_of(10) {
                        tracing::warn!(
                            node = config.id,
                            member = %address,
                            "could not join through {address} yet ({reason}); asking again"
                        );
                    }
                }
            }
        }
        round += 1;
        tokio::select! {
            () = &mut *shutdown => return Ok(None),
            () = tokio::time::sleep(ASK_AGAIN_AFTER) => {}
        }
    }
}

/// Why one join request did not add the node.
enum Asked {
    /// Asking again cannot change it.
    Refused(ChangeRefused),
    /// Worth asking again (no answer, no leader, a change in progress).
    Again(String),
}

async fn ask(
    connector: &dyn Connector,
    address: &str,
    request: &JoinRequest,
    token: Option<&str>,
) -> Result<Joined, Asked> {
    let channel =
        connector.channel_to_address(address).map_err(|error| Asked::Refused(ChangeRefused::Invalid(error)))?;
    let mut client = RaftClient::new(channel)
        .max_decoding_message_size(PEER_MESSAGE_BYTES_MAX)
        .max_encoding_message_size(PEER_MESSAGE_BYTES_MAX);
    let mut call = tonic::Request::new(encode(request));
    if let Some(token) = token {
        let value = format!("Bearer {token}").parse().map_err(|_| {
            Asked::Refused(ChangeRefused::Invalid("the token holds characters a header cannot carry".into()))
        })?;
        call.metadata_mut().insert(api::auth::AUTHORIZATION_HEADER, value);
    }
    let answer = match tokio::time::timeout(JOIN_TIMEOUT, client.join(call)).await {
        Err(_) => return Err(Asked::Again(format!("no answer within {JOIN_TIMEOUT:?}"))),
        Ok(Err(status)) => return Err(Asked::Again(status.message().to_string())),
        Ok(Ok(answer)) => answer.into_inner(),
    };
    match decode::<Result<Joined, ChangeRefused>>(&answer) {
        Err(error) => Err(Asked::Again(error)),
        Ok(Ok(joined)) => Ok(joined),
        Ok(Err(refused @ (ChangeRefused::Unavailable(_) | ChangeRefused::NotReady(_)))) => {
            Err(Asked::Again(refused.to_string()))
        }
        Ok(Err(refused)) => Err(Asked::Refused(refused)),
    }
}
