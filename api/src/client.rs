//! The gRPC client of a Strand cluster, used by the CLI, the benchmark and the tests.
//!
//! It talks to any node: a node forwards writes to the leader itself. When a node is down or no
//! leader is elected, the client moves to the next endpoint and retries with exponential backoff
//! until its deadline, then fails with [`ClientError::Unavailable`]. Every mutating request
//! carries the client's id and a request number, and a retry reuses them, so the cluster applies
//! it at most once (see `api::state::session`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status as GrpcStatus};

use crate::command::{Command, Query};
use crate::convert::{self, Consistency, ReadProto, WriteProto};
use crate::model::Namespace;
use crate::outcome::{Outcome, Refusal};
use crate::proto as pb;
use crate::proto::beads_client::BeadsClient;
use crate::proto::cluster_client::ClusterClient;
use crate::request_ids::RequestIds;

/// Shortest pause between retries.
pub const RETRY_BACKOFF_MS_MIN: u64 = 20;
/// Longest pause between retries.
pub const RETRY_BACKOFF_MS_MAX: u64 = 500;

/// Settings of a [`Client`].
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// `host:port` of cluster nodes; any of them will do.
    pub endpoints: Vec<String>,
    /// The namespace of every request.
    pub namespace: Namespace,
    /// How reads are served.
    pub consistency: Consistency,
    /// How long one call may take, retries included.
    pub deadline: Duration,
    /// How long one attempt may take.
    pub attempt_timeout: Duration,
    /// The client's id for exactly-once retries; random when `None`.
    pub client_id: Option<u64>,
}

impl ClientConfig {
    /// Settings for these endpoints with the defaults: namespace `default`, linearizable reads,
    /// a 15 s deadline and 5 s attempts.
    pub fn new(endpoints: Vec<String>) -> ClientConfig {
        ClientConfig {
            endpoints,
            namespace: Namespace::default_namespace(),
            consistency: Consistency::Linearizable,
            deadline: Duration::from_secs(15),
            attempt_timeout: Duration::from_secs(5),
            client_id: None,
        }
    }
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The cluster refused the command (exit code 1).
    #[error("{0}")]
    Refused(Refusal),
    /// No node answered, or no leader was elected, before the deadline (exit code 3).
    #[error("cluster unavailable: {0}")]
    Unavailable(String),
    /// The endpoints or the answer were malformed (exit code 1).
    #[error("{0}")]
    Failed(String),
}

/// A client of a Strand cluster. Cheap to share behind an `Arc`; calls may run concurrently.
pub struct Client {
    endpoints: Vec<String>,
    channels: Vec<Channel>,
    current: AtomicUsize,
    request_ids: RequestIds,
    config: ClientConfig,
}

fn is_transient(status: &GrpcStatus) -> bool {
    matches!(status.code(), Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown)
        && convert::refusal_from_status(status).is_none()
}

impl Client {
    /// A client of these endpoints. Connections are opened lazily, on first use.
    pub fn new(config: ClientConfig) -> Result<Client, ClientError> {
        if config.endpoints.is_empty() {
            return Err(ClientError::Failed("no endpoints given; pass --endpoints host:port,...".into()));
        }
        let mut channels = Vec::with_capacity(config.endpoints.len());
        for endpoint in &config.endpoints {
            let uri = if endpoint.contains("://") { endpoint.clone() } else { format!("http://{endpoint}") };
            let endpoint_config = Endpoint::from_shared(uri)
                .map_err(|error| ClientError::Failed(format!("endpoint {endpoint:?} is not host:port ({error})")))?
                .connect_timeout(config.attempt_timeout)
                .timeout(config.attempt_timeout)
                .tcp_nodelay(true);
            channels.push(endpoint_config.connect_lazy());
        }
        Client::with_channels(config, channels)
    }

    /// A client over channels the caller opened, one per endpoint in the same order (the
    /// simulator's channels run over its simulated network).
    pub fn with_channels(config: ClientConfig, channels: Vec<Channel>) -> Result<Client, ClientError> {
        if channels.is_empty() || channels.len() != config.endpoints.len() {
            return Err(ClientError::Failed(format!(
                "{} channels for {} endpoints; give one channel per endpoint",
                channels.len(),
                config.endpoints.len()
            )));
        }
        let client_id = config.client_id.unwrap_or_else(|| rand::random::<u64>() | 1);
        Ok(Client {
            endpoints: config.endpoints.clone(),
            channels,
            current: AtomicUsize::new(0),
            request_ids: RequestIds::new(client_id),
            config,
        })
    }

    /// The client's id, as sent in every write.
    pub fn client_id(&self) -> u64 {
        self.request_ids.client_id()
    }

    /// Runs `attempt` against the current endpoint, moving on and backing off on transient
    /// failures until the deadline.
    async fn with_retries<T, F, Fut>(&self, mut attempt: F) -> Result<T, ClientError>
    where
        F: FnMut(Channel) -> Fut,
        Fut: std::future::Future<Output = Result<T, GrpcStatus>>,
    {
        let started = tokio::time::Instant::now();
        let mut backoff = Duration::from_millis(RETRY_BACKOFF_MS_MIN);
        loop {
            let index = self.current.load(Ordering::Relaxed) % self.channels.len();
            let status = match attempt(self.channels[index].clone()).await {
                Ok(value) => return Ok(value),
                Err(status) => status,
            };
            if let Some(refusal) = convert::refusal_from_status(&status) {
                return Err(ClientError::Refused(refusal));
            }
            if matches!(status.code(), Code::OutOfRange | Code::ResourceExhausted) {
                return Err(ClientError::Failed(format!(
                    "the request or its answer is over the size limit ({}); send less at once",
                    status.message()
                )));
            }
            if !is_transient(&status) {
                return Err(ClientError::Failed(status.message().to_string()));
            }
            let _ = self.current.compare_exchange(index, index + 1, Ordering::Relaxed, Ordering::Relaxed);
            if started.elapsed() + backoff > self.config.deadline {
                return Err(ClientError::Unavailable(format!(
                    "no node of {} could serve the request within {:?} (last error from {}: {}); check that the cluster is running and --endpoints is right",
                    self.endpoints.join(","),
                    self.config.deadline,
                    self.endpoints[index],
                    status.message()
                )));
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(RETRY_BACKOFF_MS_MAX));
        }
    }

    /// Applies a command through the cluster, exactly once however often it is retried.
    pub async fn execute(&self, command: Command) -> Result<Outcome, ClientError> {
        let request_id = self.request_ids.begin();
        let header = pb::WriteHeader {
            namespace: self.config.namespace.0.clone(),
            client_id: request_id.client_id,
            request_seq: request_id.request_seq,
            lowest_unacked: request_id.lowest_unacked,
        };
        let request = convert::write_to_proto(header, &command);
        let size = request.encoded_len();
        if size > crate::limits::REQUEST_BYTES_MAX {
            self.request_ids.finish(&request_id);
            return Err(ClientError::Failed(format!(
                "the request is {size} bytes, over the size limit of {} bytes; send less at once",
                crate::limits::REQUEST_BYTES_MAX
            )));
        }
        let result = self
            .with_retries(|channel| {
                let request = request.clone();
                async move { send_write(channel, request).await }
            })
            .await;
        self.request_ids.finish(&request_id);
        // A refusal arrives as an error status, so it comes back as `ClientError::Refused`;
        // an expired session must renew the client id on that path too, or every later request
        // of this client would be refused as well.
        let answer = match result {
            Ok(answer) => answer,
            Err(ClientError::Refused(refusal)) => Err(refusal),
            Err(error) => return Err(error),
        };
        if let Err(Refusal::SessionExpired { .. }) = &answer {
            // This request's outcome is unknown, but later ones start a fresh session.
            // The new id is derived from the old one (itself random), so a seeded client
            // renews the same way every run.
            self.request_ids.renew(&request_id, next_client_id(request_id.client_id));
        }
        answer.map_err(ClientError::Refused)
    }

    /// Runs a read with the client's consistency.
    pub async fn query(&self, query: Query) -> Result<Outcome, ClientError> {
        let consistency = match self.config.consistency {
            Consistency::Linearizable => pb::Consistency::Linearizable,
            Consistency::Serializable => pb::Consistency::Serializable,
        };
        let header = pb::ReadHeader { namespace: self.config.namespace.0.clone(), consistency: consistency as i32 };
        let answer = self
            .with_retries(|channel| {
                let request = convert::read_to_proto(header.clone(), &query);
                async move { send_read(channel, request).await }
            })
            .await?;
        answer.map_err(ClientError::Refused)
    }

    /// The cluster's status as the first reachable node sees it.
    pub async fn status(&self, include_digest: bool) -> Result<pb::StatusResponse, ClientError> {
        self.with_retries(|channel| async move {
            let response = ClusterClient::new(channel).status(pb::StatusRequest { include_digest }).await?;
            Ok(response.into_inner())
        })
        .await
    }
}

/// The id a client takes after its session expired: a bijective mix of the old one (splitmix64),
/// never 0.
fn next_client_id(client_id: u64) -> u64 {
    let mut mixed = client_id.wrapping_add(0x9e37_79b9_7f4a_7c15);
    mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (mixed ^ (mixed >> 31)) | 1
}

async fn send_write(channel: Channel, request: WriteProto) -> Result<Result<Outcome, Refusal>, GrpcStatus> {
    let mut client = BeadsClient::new(channel)
        .max_decoding_message_size(crate::limits::RESPONSE_BYTES_MAX)
        .max_encoding_message_size(crate::limits::REQUEST_BYTES_MAX);
    let answer = match request {
        WriteProto::Create(request) => convert::outcome_from_bead(client.create(request).await?.into_inner()),
        WriteProto::Update(request) => convert::outcome_from_bead(client.update(request).await?.into_inner()),
        WriteProto::SetMetadata(request) => {
            convert::outcome_from_bead(client.set_metadata(request).await?.into_inner())
        }
        WriteProto::Claim(request) => convert::outcome_from_bead(client.claim(request).await?.into_inner()),
        WriteProto::ClaimNext(request) => convert::outcome_from_beads(client.claim_next(request).await?.into_inner()),
        WriteProto::Close(request) => convert::outcome_from_beads(client.close(request).await?.into_inner()),
        WriteProto::Reopen(request) => convert::outcome_from_bead(client.reopen(request).await?.into_inner()),
        WriteProto::Delete(request) => client.delete(request).await.map(|_| Ok(Outcome::Done))?,
        WriteProto::DepAdd(request) => client.dep_add(request).await.map(|_| Ok(Outcome::Done))?,
        WriteProto::DepRemove(request) => client.dep_remove(request).await.map(|_| Ok(Outcome::Done))?,
    };
    Ok(answer)
}

async fn send_read(channel: Channel, request: ReadProto) -> Result<Result<Outcome, Refusal>, GrpcStatus> {
    let mut client = BeadsClient::new(channel).max_decoding_message_size(crate::limits::RESPONSE_BYTES_MAX);
    let answer = match request {
        ReadProto::Get(request) => convert::outcome_from_beads(client.get(request).await?.into_inner()),
        ReadProto::List(request) => convert::outcome_from_beads(client.list(request).await?.into_inner()),
        ReadProto::Ready(request) => convert::outcome_from_beads(client.ready(request).await?.into_inner()),
        ReadProto::Children(request) => convert::outcome_from_beads(client.children(request).await?.into_inner()),
        ReadProto::ListByLabel(request) => {
            convert::outcome_from_beads(client.list_by_label(request).await?.into_inner())
        }
        ReadProto::DepList(request) => {
            let rows = client.dep_list(request).await?.into_inner().dependencies;
            Ok(Outcome::Dependencies(rows.into_iter().map(Into::into).collect()))
        }
    };
    Ok(answer)
}
