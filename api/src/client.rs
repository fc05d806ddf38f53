//! The gRPC client of a Strand cluster, used by the CLI, the benchmark and the tests.
//!
//! It talks to any node: a node forwards writes to the leader itself. When a node is down or no
//! leader is elected, the client moves to the next endpoint and retries with exponential backoff
//! until its deadline, then fails with [`ClientError::Unavailable`]. A node that does not answer
//! at all (down, partitioned, frozen) is left after [`ClientConfig::failover_timeout`]: the limit
//! on opening a connection, and on an open call the HTTP/2 ping it must answer. A slow but live
//! node keeps the call for the whole attempt timeout. Every mutating request
//! carries the client's id and a request number, and a retry reuses them, so the cluster applies
//! it at most once (see `api::state::session`).
//!
//! [`Client::watch`] follows a namespace's event log across node failures: it resumes on another
//! node after the last sequence number it yielded, so it neither misses nor repeats an event.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status as GrpcStatus, Streaming};

use crate::command::{Command, Query};
use crate::convert::{self, Consistency, IntoAnswer};
use crate::model::{Event, Namespace};
use crate::outcome::{Answer, Outcome, Refusal};
use crate::proto as pb;
use crate::proto::cluster_client::ClusterClient;
use crate::proto::events_client::EventsClient;
use crate::registry::ClientRpc;
use crate::request_ids::RequestIds;

/// The default [`ClientConfig::failover_timeout`]: the node's default RPC timeout
/// (`rpc_timeout_ms`).
pub const FAILOVER_TIMEOUT_MS_DEFAULT: u64 = 2_000;

/// Shortest pause between retries.
pub const RETRY_BACKOFF_MS_MIN: u64 = 20;
/// Longest pause between retries.
pub const RETRY_BACKOFF_MS_MAX: u64 = 500;

const _: () = assert!(RETRY_BACKOFF_MS_MIN <= RETRY_BACKOFF_MS_MAX);

/// A gRPC client of one service over `channel`, with the request and response size limits.
macro_rules! limited {
    ($client:ident, $channel:expr) => {
        $client::new($channel)
            .max_decoding_message_size(crate::limits::RESPONSE_BYTES_MAX)
            .max_encoding_message_size(crate::limits::REQUEST_BYTES_MAX)
    };
}

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
    /// How long a node may stay silent before the client moves to the next endpoint: opening a
    /// connection may take this long, and while a call is open the node must answer an HTTP/2
    /// ping sent after half of it of silence within the other half. A frozen node is thus left
    /// after about this long, while a live node working on a slow call keeps it.
    pub failover_timeout: Duration,
    /// The client's id for exactly-once retries; random when `None`.
    pub client_id: Option<u64>,
    /// Who acts: sent with every write and recorded in its events.
    pub actor: String,
    /// The id prefix the namespace gets if a write of this client creates it (the cluster's
    /// configured prefix when `None`).
    pub prefix: Option<String>,
    /// Whether the namespace must exist: requests to one that does not are refused
    /// (`Refusal::NamespaceNotFound`) instead of creating it (writes) or reading it as empty.
    pub namespace_must_exist: bool,
    /// TLS to the nodes (their CA, and a client certificate if the cluster requires one);
    /// `None`: plain TCP.
    pub tls: Option<crate::tls::ClientTls>,
    /// The bearer token sent with every call (`strand_` and 64 hex digits); `None`: none, for a
    /// cluster without auth.
    pub token: Option<String>,
}

impl ClientConfig {
    /// Settings for these endpoints with the defaults: namespace `default`, linearizable reads,
    /// a 15 s deadline, 5 s attempts and a 2 s failover timeout.
    pub fn new(endpoints: Vec<String>) -> ClientConfig {
        ClientConfig {
            endpoints,
            namespace: Namespace::default_namespace(),
            consistency: Consistency::Linearizable,
            deadline: Duration::from_secs(15),
            attempt_timeout: Duration::from_secs(5),
            failover_timeout: Duration::from_millis(FAILOVER_TIMEOUT_MS_DEFAULT),
            client_id: None,
            actor: String::new(),
            prefix: None,
            namespace_must_exist: false,
            tls: None,
            token: None,
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
    channels: Vec<ClientChannel>,
    /// Per endpoint: whether it gave a final answer (see [`ENDPOINT_FINAL_HEADER`]).
    ended: Vec<AtomicBool>,
    current: AtomicUsize,
    request_ids: RequestIds,
    config: ClientConfig,
}

/// The metadata key with which a node marks an answer final for itself (its value says why:
/// `removed`, a node removed from the cluster): no retry on that endpoint can change it, so the
/// client moves to another at once, or fails at once when every endpoint answered so.
pub const ENDPOINT_FINAL_HEADER: &str = "strand-endpoint-final";

/// Whether `status` is final for the endpoint that answered it (see [`ENDPOINT_FINAL_HEADER`]).
pub fn is_endpoint_final(status: &GrpcStatus) -> bool {
    status.metadata().get(ENDPOINT_FINAL_HEADER).is_some()
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
        let tls = match &config.tls {
            Some(tls) => Some(tls.dialer().map_err(ClientError::Failed)?),
            None => None,
        };
        let mut channels = Vec::with_capacity(config.endpoints.len());
        for endpoint in &config.endpoints {
            let uri = if endpoint.contains("://") { endpoint.clone() } else { format!("http://{endpoint}") };
            let endpoint_config = Endpoint::from_shared(uri)
                .map_err(|error| ClientError::Failed(format!("endpoint {endpoint:?} is not host:port ({error})")))?
                .connect_timeout(config.failover_timeout)
                .timeout(config.attempt_timeout)
                // HTTP/2 pings while a call is open: a call (or a watch) on a node that froze or
                // vanished without closing its connection (a stopped process, a partition, a
                // powered-off host) fails after about one failover timeout instead of the whole
                // attempt timeout, or forever for a watch, and moves to another node. A frozen
                // node's kernel still completes the TCP handshake, so the connect timeout alone
                // would not notice it.
                .http2_keep_alive_interval(config.failover_timeout / 2)
                .keep_alive_timeout(config.failover_timeout / 2)
                .tcp_nodelay(true);
            channels.push(match &tls {
                Some(tls) => {
                    let tls = tls.clone();
                    crate::tls::channel(endpoint_config, move || tls.clone(), None, config.failover_timeout)
                }
                None => endpoint_config.connect_lazy(),
            });
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
        let bearer = Bearer::new(config.token.as_deref())?;
        let channels: Vec<_> =
            channels.into_iter().map(|channel| InterceptedService::new(channel, bearer.clone())).collect();
        let client_id = config.client_id.unwrap_or_else(|| rand::random::<u64>() | 1);
        Ok(Client {
            endpoints: config.endpoints.clone(),
            ended: channels.iter().map(|_| AtomicBool::new(false)).collect(),
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

    /// What a connection failure that looks like TLS trouble means: what to do about it (empty
    /// when it does not look like TLS trouble), and whether it is final. A verification failure
    /// (a certificate the client does not trust or that names another host, a client certificate
    /// the node requires and was not given) is final: no retry and no other node of the same
    /// cluster can pass it.
    fn tls_trouble(&self, message: &str) -> (&'static str, bool) {
        let lower = message.to_lowercase();
        let shows = |signs: &[&str]| signs.iter().any(|sign| lower.contains(sign));
        const UNTRUSTED: &str =
            "; check that --cacert is the CA that signed the nodes' certificates and that they name the host you dial";
        match &self.config.tls {
            None if shows(&["h2 protocol error", "http2 error"]) => (
                "; the node may serve TLS: pass --cacert with the CA that signed its certificate (or set $STRAND_CACERT)",
                false,
            ),
            Some(_) if shows(&["certificaterequired", "certificate required"]) => {
                ("; the cluster requires a client certificate: pass --cert and --key", true)
            }
            Some(_) if shows(&["invalid peer certificate", "unknownissuer", "notvalidforname", "badsignature"]) => {
                (UNTRUSTED, true)
            }
            Some(_) if shows(&["certificate"]) => (UNTRUSTED, false),
            Some(_) if shows(&["tls", "handshake", "corrupt message"]) => {
                ("; the node may not serve TLS: drop --cacert, or check its [tls] settings", false)
            }
            _ => ("", false),
        }
    }

    /// The current endpoint, skipping those that gave a final answer (while any has not).
    fn live_endpoint(&self) -> usize {
        self.live_endpoint_from(self.current.load(Ordering::Relaxed))
    }

    /// The endpoint a call starts on when the client's position is `current`: that one, or the
    /// next that gave no final answer.
    fn live_endpoint_from(&self, current: usize) -> usize {
        let count = self.channels.len();
        (0..count)
            .map(|step| (current + step) % count)
            .find(|index| !self.ended[*index].load(Ordering::Relaxed))
            .unwrap_or(current % count)
    }

    /// Moves the client's position past `index`, unless another call already moved it elsewhere.
    /// The position stays below the endpoints' count, and is judged by the endpoint it leads to,
    /// so a client moves on from every endpoint, the last one included, and from one reached by
    /// skipping ended endpoints.
    fn move_past(&self, index: usize) {
        let count = self.channels.len();
        let _ = self.current.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |current| {
            (self.live_endpoint_from(current) == index).then_some((index + 1) % count)
        });
    }

    /// Runs `attempt` against the current endpoint (its index and channel), moving on and backing
    /// off on transient failures until the deadline.
    async fn with_retries<T, F, Fut>(&self, mut attempt: F) -> Result<T, ClientError>
    where
        F: FnMut(usize, ClientChannel) -> Fut,
        Fut: std::future::Future<Output = Result<T, GrpcStatus>>,
    {
        let started = tokio::time::Instant::now();
        let mut backoff = Duration::from_millis(RETRY_BACKOFF_MS_MIN);
        loop {
            let index = self.live_endpoint();
            let status = match attempt(index, self.channels[index].clone()).await {
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
            if is_endpoint_final(&status) {
                self.ended[index].store(true, Ordering::Relaxed);
                if self.ended.iter().all(|ended| ended.load(Ordering::Relaxed)) {
                    return Err(ClientError::Failed(format!(
                        "{} answered: {}; give --endpoints of the cluster's current members (`strand member list`)",
                        self.endpoints[index],
                        status.message()
                    )));
                }
                self.move_past(index);
                continue;
            }
            let (hint, tls_final) = self.tls_trouble(status.message());
            if !is_transient(&status) {
                return Err(ClientError::Failed(format!("{}{hint}", status.message())));
            }
            if tls_final {
                return Err(ClientError::Failed(format!(
                    "TLS with {} failed: {}{hint}",
                    self.endpoints[index],
                    status.message()
                )));
            }
            self.move_past(index);
            if started.elapsed() + backoff > self.config.deadline {
                return Err(ClientError::Unavailable(format!(
                    "no node of {} could serve the request within {:?} (last error from {}: {}); check that the cluster is running and --endpoints is right{}",
                    self.endpoints.join(","),
                    self.config.deadline,
                    self.endpoints[index],
                    status.message(),
                    hint
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
            actor: self.config.actor.clone(),
            prefix: self.config.prefix.clone().unwrap_or_default(),
            namespace_must_exist: self.config.namespace_must_exist,
        };
        let Some(request) = convert::write_to_proto(header, &command) else {
            self.request_ids.finish(&request_id);
            return Err(ClientError::Failed(format!(
                "{} is a controller action, which only the cluster's leader proposes",
                command.name()
            )));
        };
        let size = request.encoded_len();
        if size > crate::limits::REQUEST_BYTES_MAX {
            self.request_ids.finish(&request_id);
            return Err(ClientError::Failed(format!(
                "the request is {size} bytes, over the size limit of {} bytes; send less at once",
                crate::limits::REQUEST_BYTES_MAX
            )));
        }
        let result = self
            .with_retries(|_, channel| {
                let request = request.clone();
                async move { send(channel, request).await }
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

    /// The header of the client's reads: its namespace and consistency.
    fn read_header(&self) -> pb::ReadHeader {
        let consistency = match self.config.consistency {
            Consistency::Linearizable => pb::Consistency::Linearizable,
            Consistency::Serializable => pb::Consistency::Serializable,
        };
        pb::ReadHeader {
            namespace: self.config.namespace.0.clone(),
            consistency: consistency as i32,
            namespace_must_exist: self.config.namespace_must_exist,
        }
    }

    /// Runs a read with the client's consistency.
    pub async fn query(&self, query: Query) -> Result<Outcome, ClientError> {
        let request = convert::read_to_proto(self.read_header(), &query);
        let answer = self
            .with_retries(|_, channel| {
                let request = request.clone();
                async move { send(channel, request).await }
            })
            .await?;
        answer.map_err(ClientError::Refused)
    }

    /// Streams the events of the client's namespace with a sequence number above `after`, oldest
    /// first, then each new one as it is applied, forever.
    ///
    /// The stream survives node failures: when its node fails or ends the stream, it moves to the
    /// next endpoint (with backoff, and the client's deadline for each reconnection) and resumes
    /// after the last sequence number it yielded, so no event is missed or repeated. It ends after
    /// yielding an error: a refusal (e.g. [`Refusal::Compacted`] when `after` is older than the
    /// events kept), or [`ClientError::Unavailable`] when no node serves it within the deadline.
    pub fn watch(
        &self,
        after: u64,
        types: Vec<String>,
    ) -> impl futures::Stream<Item = Result<Event, ClientError>> + '_ {
        let watch = Watch {
            client: self,
            after,
            types,
            open: None,
            backoff: Duration::from_millis(RETRY_BACKOFF_MS_MIN),
            lost_since: None,
            finished: false,
        };
        futures::stream::unfold(watch, |mut watch| async move {
            if watch.finished {
                return None;
            }
            let item = watch.next_event().await;
            watch.finished = item.is_err();
            Some((item, watch))
        })
    }

    /// Opens a watch stream on the first endpoint that serves it; answers the endpoint's index too.
    async fn open_watch(&self, after: u64, types: &[String]) -> Result<(usize, Streaming<pb::Event>), ClientError> {
        let request = pb::WatchRequest { header: Some(self.read_header()), after, types: types.to_vec() };
        self.with_retries(|index, channel| {
            let request = request.clone();
            async move {
                let stream = limited!(EventsClient, channel).watch(request).await?.into_inner();
                Ok((index, stream))
            }
        })
        .await
    }

    /// Moves the leadership to voter `to` and answers once it leads (`timeout`: how long the
    /// cluster waits for that; each attempt must be allowed longer, see
    /// [`ClientConfig::attempt_timeout`]).
    pub async fn move_leader(&self, to: u64, timeout: Duration) -> Result<pb::MoveLeaderResponse, ClientError> {
        let timeout_ms = timeout.as_millis() as u64;
        self.with_retries(|_, channel| async move {
            let response = ClusterClient::new(channel).move_leader(pb::MoveLeaderRequest { to, timeout_ms }).await?;
            Ok(response.into_inner())
        })
        .await
    }

    /// Adds member `id` as a learner (see `Cluster.AddMember`); answers the membership once the
    /// change committed.
    pub async fn add_member(&self, request: pb::AddMemberRequest) -> Result<pb::MembershipResponse, ClientError> {
        self.with_retries(|_, channel| {
            let request = request.clone();
            async move { Ok(ClusterClient::new(channel).add_member(request).await?.into_inner()) }
        })
        .await
    }

    /// Makes learner `id` a voter (see `Cluster.PromoteMember`).
    pub async fn promote_member(&self, id: u64) -> Result<pb::MembershipResponse, ClientError> {
        self.with_retries(|_, channel| async move {
            Ok(ClusterClient::new(channel).promote_member(pb::MemberRequest { id }).await?.into_inner())
        })
        .await
    }

    /// Removes member `id` (see `Cluster.RemoveMember`).
    pub async fn remove_member(&self, id: u64) -> Result<pb::MembershipResponse, ClientError> {
        self.with_retries(|_, channel| async move {
            Ok(ClusterClient::new(channel).remove_member(pb::MemberRequest { id }).await?.into_inner())
        })
        .await
    }

    /// A backup of the whole state from the first reachable node: the chunks of the backup file,
    /// in order (see `Cluster.SnapshotSave`).
    pub async fn snapshot_save(&self) -> Result<BackupChunks, ClientError> {
        self.with_retries(|_, channel| async move {
            let response = ClusterClient::new(channel).snapshot_save(pb::SnapshotSaveRequest {}).await?;
            Ok(BackupChunks(response.into_inner()))
        })
        .await
    }

    /// The cluster's status as the first reachable node sees it.
    pub async fn status(&self, include_digest: bool) -> Result<pb::StatusResponse, ClientError> {
        self.with_retries(|_, channel| async move {
            let response = ClusterClient::new(channel).status(pb::StatusRequest { include_digest }).await?;
            Ok(response.into_inner())
        })
        .await
    }
}

/// The chunks of a backup file as a node streams them ([`Client::snapshot_save`]).
pub struct BackupChunks(tonic::Streaming<pb::SnapshotSaveChunk>);

impl BackupChunks {
    /// The next chunk's bytes, `None` at the end; an error when the node stopped sending.
    pub async fn next(&mut self) -> Result<Option<Vec<u8>>, ClientError> {
        match self.0.message().await {
            Ok(chunk) => Ok(chunk.map(|chunk| chunk.data)),
            Err(status) => Err(ClientError::Unavailable(format!(
                "the node stopped sending the backup: {}; try again",
                status.message()
            ))),
        }
    }
}

/// A channel that adds the client's token to every call.
type ClientChannel = InterceptedService<Channel, Bearer>;

/// Adds `authorization: Bearer <token>` to every call, when the client has a token.
#[derive(Clone, Debug)]
struct Bearer(Option<tonic::metadata::AsciiMetadataValue>);

impl Bearer {
    fn new(token: Option<&str>) -> Result<Bearer, ClientError> {
        let Some(token) = token else { return Ok(Bearer(None)) };
        let token = token.trim();
        if !crate::auth::is_well_formed(token) {
            return Err(ClientError::Failed(format!(
                "the token is not `{}` and {} hex digits; pass the token `strand auth token create` printed (--token or $STRAND_TOKEN)",
                crate::auth::TOKEN_PREFIX,
                crate::auth::TOKEN_HEX_DIGITS
            )));
        }
        let value = format!("Bearer {token}").parse().expect("a well-formed token is ASCII");
        Ok(Bearer(Some(value)))
    }
}

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, GrpcStatus> {
        if let Some(value) = &self.0 {
            request.metadata_mut().insert(crate::auth::AUTHORIZATION_HEADER, value.clone());
        }
        Ok(request)
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

/// The state of one [`Client::watch`] stream between two events.
struct Watch<'a> {
    client: &'a Client,
    /// The last sequence number yielded (at first, the caller's `after`): a new stream resumes
    /// after it.
    after: u64,
    /// The event types asked for (empty: all).
    types: Vec<String>,
    /// The open stream and the index of its endpoint; `None` between a loss and a reconnection.
    open: Option<(usize, Streaming<pb::Event>)>,
    /// The pause before the next reconnection: doubles with each loss, reset by an event, so a
    /// node that accepts streams and drops them at once is not hammered.
    backoff: Duration,
    /// When the stream was first lost since the last event: a watch that cannot get an event
    /// through for a whole deadline (a node that keeps answering INTERNAL, say) gives up.
    lost_since: Option<tokio::time::Instant>,
    /// Set once an error was yielded; the stream then ends.
    finished: bool,
}

impl Watch<'_> {
    /// The next event, reconnecting as often as needed; an error ends the watch.
    async fn next_event(&mut self) -> Result<Event, ClientError> {
        loop {
            let (index, mut stream) = match self.open.take() {
                Some(open) => open,
                None => self.client.open_watch(self.after, &self.types).await?,
            };
            let status = match stream.message().await {
                Ok(Some(event)) => {
                    self.open = Some((index, stream));
                    let event = convert::event_from_proto(event);
                    if event.seq <= self.after {
                        // A node never sends an event twice; should one, yielding it would repeat it.
                        tracing::warn!(
                            seq = event.seq,
                            after = self.after,
                            "watch skipped an event it had already seen"
                        );
                        continue;
                    }
                    self.after = event.seq;
                    self.backoff = Duration::from_millis(RETRY_BACKOFF_MS_MIN);
                    self.lost_since = None;
                    return Ok(event);
                }
                Ok(None) => GrpcStatus::unavailable("the node ended the stream"),
                Err(status) => status,
            };
            if let Some(refusal) = convert::refusal_from_status(&status) {
                return Err(ClientError::Refused(refusal));
            }
            // A lost connection surfaces as a transient code, or as INTERNAL for an HTTP/2 error.
            if !is_transient(&status) && status.code() != Code::Internal {
                return Err(ClientError::Failed(status.message().to_string()));
            }
            let lost_since = *self.lost_since.get_or_insert_with(tokio::time::Instant::now);
            if lost_since.elapsed() > self.client.config.deadline {
                return Err(ClientError::Unavailable(format!(
                    "the watch could not be resumed after seq {} within {:?} ({}); run it again with --from {}",
                    self.after,
                    self.client.config.deadline,
                    status.message(),
                    self.after + 1
                )));
            }
            tracing::debug!(endpoint = %self.client.endpoints[index], error = %status.message(), after = self.after, "watch lost its stream; resuming on the next node");
            self.client.move_past(index);
            tokio::time::sleep(self.backoff).await;
            self.backoff = (self.backoff * 2).min(Duration::from_millis(RETRY_BACKOFF_MS_MAX));
        }
    }
}

/// Declares [`send`] from the RPC table: each request goes through its own RPC.
macro_rules! send_fn {
    ($( $service:ident $client_mod:ident :: $client:ident {
        $( $variant:ident $method:ident $request:ident $response:ident, )*
    } )*) => {
        /// Sends a tagged request through the RPC its tag names and turns the response into an
        /// answer.
        async fn send(channel: ClientChannel, request: ClientRpc) -> Result<Answer, GrpcStatus> {
            Ok(match request {
                $( $( ClientRpc::$variant(request) => {
                    use pb::$client_mod::$client;
                    limited!($client, channel).$method(request).await?.into_inner().into_answer()
                } )* )*
            })
        }
    };
}

for_each_client_rpc!(send_fn);

/// A new token: [`crate::auth::TOKEN_PREFIX`] and 256 bits from the operating system's random
/// source. Clients draw tokens (`strand auth token create`) and send the cluster only their hash.
pub fn generate_token() -> String {
    let mut bytes = [0u8; 32];
    rand::fill(&mut bytes);
    format!("{}{}", crate::auth::TOKEN_PREFIX, crate::printable::hex(&bytes))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::{Client, ClientConfig};

    /// Three endpoints nothing listens on (channels connect at their first call).
    fn client_of_three() -> Client {
        let endpoints: Vec<String> = (1..=3).map(|port| format!("127.0.0.1:{port}")).collect();
        let channels = endpoints
            .iter()
            .map(|endpoint| {
                tonic::transport::Endpoint::from_shared(format!("http://{endpoint}")).unwrap().connect_lazy()
            })
            .collect();
        Client::with_channels(ClientConfig::new(endpoints), channels).unwrap()
    }

    /// The endpoints calls would try, in order, each failing transiently (as a dead node does).
    fn tried(client: &Client, calls: usize) -> Vec<usize> {
        (0..calls)
            .map(|_| {
                let index = client.live_endpoint();
                client.move_past(index);
                index
            })
            .collect()
    }

    /// A client moved on from every endpoint, the last included: it went round its endpoints
    /// again and again, never sticking to one (the simulator's seed 163 569 193 936 533 found a
    /// client that, once past its last endpoint, tried the first forever while it was down).
    #[tokio::test]
    async fn failing_endpoints_are_left_in_turn_round_and_round() {
        let client = client_of_three();
        assert_eq!(tried(&client, 7), [0, 1, 2, 0, 1, 2, 0]);
        // An endpoint that gave a final answer is skipped, and the others still take turns.
        client.ended[1].store(true, Ordering::Relaxed);
        assert_eq!(tried(&client, 5), [2, 0, 2, 0, 2]);
        // A call that fails on an endpoint another call already left moves nothing.
        let index = client.live_endpoint();
        client.move_past(index);
        client.move_past(index);
        assert_eq!(client.live_endpoint(), if index == 0 { 2 } else { 0 });
    }

    #[test]
    fn drawn_tokens_are_well_formed_and_differ() {
        let token = super::generate_token();
        assert!(crate::auth::is_well_formed(&token), "{token}");
        assert_ne!(super::generate_token(), token);
    }
}
