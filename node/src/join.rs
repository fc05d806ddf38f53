//! `strand node --join ADDR[,ADDR]`: a node added to a running cluster asks a member to add it;
//! `strand node --rejoin`: a node whose data directory was lost asks a member which cluster it
//! belongs to.
//!
//! On an empty data directory, before Raft starts, the node sends `Raft.Join` (or, rejoining,
//! `Raft.Identify`) to the peer listener of each address in turn (with TLS, over mutual TLS with
//! its own certificate, which must name its id, and the member's certificate checked against the
//! host dialled; with auth on, a join carries the admin token given as `--token`). The member
//! checks the cluster name and the certificate. For a join it checks the token and has the leader
//! add the node as a learner (see `leader::membership`); for an identify, that the node is in its
//! membership, and changes nothing. The answer carries the cluster id and the membership, which
//! the node records in its data directory (`crate::standing`, `crate::identity`) before it serves
//! anything. A joined node then catches up from the leader as a learner (by snapshot when far
//! behind), and the leader promotes it once it stayed caught up, unless `--no-auto-promote`; a
//! rejoining one catches up before it votes (`crate::rejoin`).
//!
//! Where to ask: the `--join` addresses; a rejoining node without them asks its configured
//! `--peers`.
//!
//! A rejoining node may have lost its data before the cluster ever formed (the lowest id had not
//! initialised it yet, or its initialisation failed): no member can name its membership then. A
//! member that holds no membership and shows no cluster (term 0, an empty log, not rejoining
//! itself) answers so ([`ChangeRefused::NotFormed`]); once `others / 2 + 1` of the configured
//! other members answer so in one round of asking, the node starts as the initial member it was,
//! with no rejoin marker. That is the judgement the lowest id makes before it initialises (see
//! `crate::bootstrap`): a cluster that formed holds its first membership on a majority of its
//! members, at most one of them this node, so that many other members include one that holds it
//! and names the membership instead. A node given `--join` addresses never judges this: they
//! need not be every member.
//!
//! A refusal that asking again cannot change (another cluster's name, a certificate of another
//! node, no admin token, an id or address in use, an address that serves no Raft service, such as
//! a client port) stops the node with the reason; no answer, no leader, or a change in progress
//! is asked again until `join_timeout_ms` (`--join-timeout`) has passed, and then the node stops
//! with the last reason. Nothing is written to the data directory before an answer.
//!
//! Invariant: a joining node never initialises a cluster; a joining or rejoining node records
//! the cluster id only from a member's answer, and a rejoining node drops its rejoin marker only
//! on the answers of enough configured members that the cluster has not formed.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use api::proto::raft_client::RaftClient;
use raft_store::types::Member;

use crate::config::NodeConfig;
use crate::peer::network::{Connector, PEER_MESSAGE_BYTES_MAX, decode, encode};
use crate::peer::{ChangeRefused, JoinRequest, Joined};
use crate::rejoin::answers_needed;

/// How long one join request may take (the leader adds the learner through Raft first).
pub const JOIN_TIMEOUT: Duration = Duration::from_secs(30);
/// The wait between two rounds of asking.
pub const ASK_AGAIN_AFTER: Duration = Duration::from_secs(1);

/// What a node asks of the members.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// To be added as a learner (`--join`).
    Join,
    /// Which cluster it belongs to and its membership (`--rejoin` on an empty directory).
    Rejoin,
}

impl Purpose {
    fn verb(self) -> &'static str {
        match self {
            Purpose::Join => "join",
            Purpose::Rejoin => "rejoin",
        }
    }
}

/// What the members answered a joining or rejoining node.
#[derive(Debug)]
pub enum Answered {
    /// Its cluster's id and membership.
    Joined(Joined),
    /// Rejoining only: enough configured members showed that the cluster has not formed (see
    /// the module header); the node starts as the initial member it was.
    NotFormed,
}

/// The peer addresses a node asks for `purpose`: the `--join` addresses, or a rejoining node's
/// configured members but itself.
pub fn addresses(config: &NodeConfig, purpose: Purpose) -> Vec<String> {
    if !config.join.is_empty() || purpose == Purpose::Join {
        return config.join.clone();
    }
    config.members().into_iter().filter(|(id, _)| *id != config.id).map(|(_, address)| address).collect()
}

/// Asks the members (see [`addresses`]) until one answers for `purpose`, or, rejoining, until
/// enough answer that the cluster has not formed; `Ok(None)` when `shutdown` resolved first,
/// `Err` for a refusal that asking again cannot change, or once `config.join_timeout_ms` passed
/// without an answer.
pub async fn join(
    connector: &dyn Connector,
    config: &NodeConfig,
    purpose: Purpose,
    shutdown: &mut Pin<Box<dyn Future<Output = ()> + Send>>,
) -> Result<Option<Answered>, String> {
    let request = JoinRequest {
        cluster_name: config.cluster_name.clone(),
        id: config.id,
        member: Member {
            addr: config.advertised_peer(),
            client_addr: config.advertised_client(),
            auto_promote: config.auto_promote,
        },
    };
    let verb = purpose.verb();
    let addresses = addresses(config, purpose);
    if addresses.is_empty() {
        return Err(format!(
            "node {} has no member to ask to {verb} through: give the peer addresses of running members with --join HOST:PORT,... (or --peers)",
            config.id
        ));
    }
    let timeout = Duration::from_millis(config.join_timeout_ms);
    let deadline = tokio::time::Instant::now() + timeout;
    match purpose {
        Purpose::Join => {
            tracing::info!(node = config.id, members = ?addresses, "joining the cluster: asking a member to add this node")
        }
        Purpose::Rejoin => tracing::info!(
            node = config.id,
            members = ?addresses,
            "rejoining on an empty data directory: asking a member which cluster this node belongs to"
        ),
    }
    // Whether this node may judge that the cluster has not formed: rejoining through every
    // configured member.
    let judges_formation = purpose == Purpose::Rejoin && config.join.is_empty();
    let mut round = 0u64;
    let mut last = String::new();
    loop {
        let mut not_formed = 0;
        for address in &addresses {
            let asked = tokio::select! {
                () = &mut *shutdown => return Ok(None),
                () = tokio::time::sleep_until(deadline) => break,
                asked = ask(connector, address, purpose, &request, config.join_token.as_deref()) => asked,
            };
            match asked {
                Ok(joined) => {
                    tracing::info!(
                        node = config.id,
                        cluster_id = format!("{:016x}", joined.cluster_id),
                        index = joined.membership.index,
                        leader = joined.membership.leader,
                        "{}",
                        match purpose {
                            Purpose::Join => "joined the cluster as a learner",
                            Purpose::Rejoin => "learned this node's cluster and membership",
                        }
                    );
                    return Ok(Some(Answered::Joined(joined)));
                }
                Err(Asked::Refused(refused)) => {
                    return Err(format!("node {} could not {verb} through {address}: {refused}", config.id));
                }
                Err(Asked::NotFormed(reason)) => {
                    not_formed += 1;
                    last = format!("{address}: {reason}");
                }
                Err(Asked::Again(reason)) => {
                    if round.is_multiple_of(10) {
                        tracing::warn!(
                            node = config.id,
                            member = %address,
                            "could not {verb} through {address} yet ({reason}); asking again"
                        );
                    }
                    last = format!("{address}: {reason}");
                }
            }
        }
        if judges_formation && not_formed >= answers_needed(addresses.len()) {
            tracing::warn!(
                node = config.id,
                answered = not_formed,
                "rejoining: the cluster has not formed (these members hold no membership and no log), so this node lost nothing of it; it starts as the initial member it was, and votes at once"
            );
            return Ok(Some(Answered::NotFormed));
        }
        if not_formed > 0 && round.is_multiple_of(10) {
            tracing::warn!(
                node = config.id,
                answered = not_formed,
                needed = answers_needed(addresses.len()),
                "rejoining: members answered that the cluster has not formed on them; asking again, until it forms or enough of them say so"
            );
        }
        round += 1;
        tokio::select! {
            () = &mut *shutdown => return Ok(None),
            () = tokio::time::sleep_until(deadline) => {
                return Err(format!(
                    "node {} could not {verb}: no member answered within {} s (last: {last}); check that the members run and that each address is a member's peer address (the PEER column of `strand member list`), or raise --join-timeout. Nothing was written to --data-dir",
                    config.id,
                    timeout.as_secs()
                ));
            }
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
    /// The member holds no cluster (see [`ChangeRefused::NotFormed`]).
    NotFormed(String),
}

async fn ask(
    connector: &dyn Connector,
    address: &str,
    purpose: Purpose,
    request: &JoinRequest,
    token: Option<&str>,
) -> Result<Joined, Asked> {
    let channel =
        connector.channel_to_address(address).map_err(|error| Asked::Refused(ChangeRefused::Invalid(error)))?;
    let mut client = RaftClient::new(channel)
        .max_decoding_message_size(PEER_MESSAGE_BYTES_MAX)
        .max_encoding_message_size(PEER_MESSAGE_BYTES_MAX);
    let mut call = tonic::Request::new(encode(request));
    // The member refuses a build that cannot apply the cluster's apply version before it adds it.
    let metadata = call.metadata_mut();
    if let Ok(range) = api::version::build_apply_versions().to_string().parse() {
        metadata.insert(crate::peer::network::APPLY_VERSIONS_HEADER, range);
    }
    if let Ok(build) = api::version::build_name().parse() {
        metadata.insert(crate::peer::network::BUILD_HEADER, build);
    }
    if let Some(token) = token.filter(|_| purpose == Purpose::Join) {
        let value = format!("Bearer {token}").parse().map_err(|_| {
            Asked::Refused(ChangeRefused::Invalid("the token holds characters a header cannot carry".into()))
        })?;
        call.metadata_mut().insert(api::auth::AUTHORIZATION_HEADER, value);
    }
    let called = match purpose {
        Purpose::Join => tokio::time::timeout(JOIN_TIMEOUT, client.join(call)).await,
        Purpose::Rejoin => tokio::time::timeout(JOIN_TIMEOUT, client.identify(call)).await,
    };
    let answer = match called {
        Err(_) => return Err(Asked::Again(format!("no answer within {JOIN_TIMEOUT:?}"))),
        Ok(Err(status)) if status.code() == tonic::Code::Unimplemented => {
            return Err(Asked::Refused(ChangeRefused::Invalid(format!(
                "{address} serves no Strand Raft service that answers this (it answered {:?}): it looks like a member's client port, or a member of an older build; give the peer address of a member of this build (its --listen-peer, default port {}, the PEER column of `strand member list`)",
                status.message(),
                crate::config::DEFAULT_PEER_PORT
            ))));
        }
        Ok(Err(status)) => return Err(Asked::Again(status.message().to_string())),
        Ok(Ok(answer)) => answer.into_inner(),
    };
    match decode::<Result<Joined, ChangeRefused>>(&answer) {
        Err(error) => Err(Asked::Again(error)),
        Ok(Ok(joined)) => Ok(joined),
        Ok(Err(refused @ (ChangeRefused::Unavailable(_) | ChangeRefused::NotReady(_)))) => {
            Err(Asked::Again(refused.to_string()))
        }
        Ok(Err(ChangeRefused::NotFormed(reason))) => Err(Asked::NotFormed(reason)),
        Ok(Err(refused)) => Err(Asked::Refused(refused)),
    }
}
