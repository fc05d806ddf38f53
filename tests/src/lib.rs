//! A harness for end-to-end tests: real `strand node` processes on loopback ports, killed with
//! SIGKILL on demand and always on drop, plus helpers that wait on conditions, never on sleeps.

pub mod browser;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use api::client::{Client, ClientConfig};
use node::peer::network::{PeerIdentity, PeerRpc};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a test waits for a condition before failing.
pub const WAIT_MAX: Duration = Duration::from_secs(60);

/// Waits up to `limit` for `child` to exit, reading its output meanwhile (so a full pipe never
/// stalls it); `None` if it still runs then, and the caller kills it.
pub fn output_within(child: Child, limit: Duration) -> Option<std::process::Output> {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    finished.recv_timeout(limit).ok().map(|output| output.expect("the child's output"))
}

/// The `strand` binary: `$STRAND_BIN`, or the one built beside the test executable. The full
/// build `strand-node`, which its `node`, `dev` and `snapshot` run, must be beside it.
pub fn strand_binary() -> PathBuf {
    if let Ok(path) = std::env::var("STRAND_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>/deps/<test>");
    let binary = profile_dir.join("strand");
    for built in [&binary, &profile_dir.join("strand-node")] {
        assert!(
            built.exists(),
            "{} is missing; build it first with `cargo build --workspace --bins` (make test does)",
            built.display()
        );
    }
    binary
}

/// The newer build of the rolling-upgrade tests: `$STRAND_APPLY_NEXT_BIN`, or a script in the build
/// directory (`apply-next/strand`) that runs the default `strand` in the test-only apply-next mode
/// (`STRAND_TEST_APPLY_NEXT=1`; see `api/src/version.rs`). It `exec`s the binary, so a node it
/// starts keeps the script's process id, and a signal sent to it reaches the node.
pub fn apply_next_binary() -> PathBuf {
    if let Ok(path) = std::env::var("STRAND_APPLY_NEXT_BIN") {
        return PathBuf::from(path);
    }
    let default = strand_binary();
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe.ancestors().nth(3).expect("<target>/<profile>/deps/<test>").join("apply-next");
    std::fs::create_dir_all(&dir).expect("create the apply-next directory");
    let script = dir.join("strand");
    let text = format!(
        "#!/bin/sh\n# The test-only apply-next mode of the default build (tests/src/lib.rs, apply_next_binary).\n{}=1 exec '{}' \"$@\"\n",
        api::version::TEST_APPLY_NEXT_ENV,
        default.display()
    );
    if std::fs::read_to_string(&script).ok().as_deref() != Some(text.as_str()) {
        // Written aside and renamed into place: test processes running at once may each write it.
        let aside = dir.join(format!("strand.{}", std::process::id()));
        std::fs::write(&aside, &text).expect("write the apply-next script");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&aside, std::fs::Permissions::from_mode(0o755)).expect("make the script executable");
        std::fs::rename(&aside, &script).expect("put the apply-next script in place");
    }
    script
}

/// Lowest port the harness hands out.
const PORTS_LOW: u16 = 10_000;

/// A free loopback port, bound once to check it, then released for a node to take, and never
/// handed out twice in one test process. It is drawn
/// at random below the kernel's ephemeral range, so the outgoing connections of tests running
/// beside this one (which take ephemeral ports) cannot take it before the node binds it; when
/// that range leaves no room below it, the kernel picks one (port 0).
pub fn free_port() -> u16 {
    // A port is handed out once per test process: checked free, it is released for its node to
    // take, so without this a second call could hand the same port to another listener.
    static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    loop {
        let port = free_port_once();
        if HANDED_OUT.lock().expect("handed-out ports lock").insert(port) {
            return port;
        }
    }
}

fn free_port_once() -> u16 {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    if ephemeral_low > PORTS_LOW + 1_000 {
        for _ in 0..1_000 {
            let random = std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), 0u8);
            let port = PORTS_LOW + (random % u64::from(ephemeral_low - PORTS_LOW)) as u16;
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local address").port()
}

/// One node process.
pub struct NodeProcess {
    /// Node id.
    pub id: u64,
    /// `127.0.0.1:port` of its client listener.
    pub address: String,
    /// `127.0.0.1:port` of its peer listener.
    pub peer_address: String,
    /// Its data directory.
    pub data_dir: PathBuf,
    /// The peer addresses it joins through (`--join`), for a node added to the running cluster;
    /// `None`: a member of the first start (`--peers`).
    pub join: Option<String>,
    /// The `strand` binary it runs; `None`: [`strand_binary`].
    pub binary: Option<PathBuf>,
    /// Environment variables it starts with, beside the harness's own.
    pub env: Vec<(String, String)>,
    child: Option<Child>,
}

/// A cluster of node processes in a temporary directory.
pub struct Cluster {
    /// The nodes, index `id - 1`.
    pub nodes: Vec<NodeProcess>,
    peers: String,
    config: Option<PathBuf>,
    /// The open-files limit (`ulimit -n`, soft and hard) the nodes start under; `None`: the
    /// test's own.
    open_files: Option<u64>,
    /// The TLS files' directory (made by `strand certs init`) when the cluster runs TLS.
    tls: Option<Tls>,
    dir: tempfile::TempDir,
}

/// How a cluster of the harness runs TLS.
#[derive(Clone, Debug)]
pub struct Tls {
    /// Where `strand certs init` wrote the CA, node and client certificates.
    pub dir: PathBuf,
    /// Whether the client listener requires client certificates.
    pub client_certificates: bool,
}

impl Cluster {
    /// Starts `size` nodes; `config_toml`, if given, is written to a file passed as `--config`.
    pub fn start(size: u64, config_toml: Option<&str>) -> Cluster {
        Cluster::start_with(size, config_toml, None)
    }

    /// Starts `size` nodes as [`Cluster::start`] does, each under an open-files limit (soft and
    /// hard, so the node cannot raise it) of `open_files`, if given.
    pub fn start_with(size: u64, config_toml: Option<&str>, open_files: Option<u64>) -> Cluster {
        Cluster::start_full(size, config_toml, open_files, false, false)
    }

    /// Starts `size` nodes with TLS on both listeners (certificates from `strand certs init`),
    /// requiring client certificates when `client_certificates`.
    pub fn start_tls(size: u64, client_certificates: bool) -> Cluster {
        Cluster::start_full(size, None, None, true, client_certificates)
    }

    /// Lays out `size` nodes as [`Cluster::start`] does, and starts none (`restart` starts one).
    pub fn unstarted(size: u64) -> Cluster {
        Cluster::layout(size, None, None, false, false)
    }

    fn start_full(
        size: u64,
        config_toml: Option<&str>,
        open_files: Option<u64>,
        tls: bool,
        client_certificates: bool,
    ) -> Cluster {
        let mut cluster = Cluster::layout(size, config_toml, open_files, tls, client_certificates);
        for id in 1..=size {
            cluster.restart(id);
        }
        cluster
    }

    fn layout(
        size: u64,
        config_toml: Option<&str>,
        open_files: Option<u64>,
        tls: bool,
        client_certificates: bool,
    ) -> Cluster {
        let dir = tempfile::tempdir().expect("temporary directory");
        let tls = tls.then(|| {
            let certs = dir.path().join("certs");
            let made = Command::new(strand_binary())
                .args(["certs", "init", "--nodes", &size.to_string(), "--dir"])
                .arg(&certs)
                .output()
                .expect("strand certs init runs");
            assert!(made.status.success(), "certs init: {}", String::from_utf8_lossy(&made.stderr));
            Tls { dir: certs, client_certificates }
        });
        let config = config_toml.map(|text| {
            let path = dir.path().join("node.toml");
            std::fs::write(&path, text).expect("write config");
            path
        });
        let nodes: Vec<NodeProcess> = (1..=size)
            .map(|id| NodeProcess {
                id,
                address: format!("127.0.0.1:{}", free_port()),
                peer_address: format!("127.0.0.1:{}", free_port()),
                data_dir: dir.path().join(format!("node-{id}")),
                join: None,
                binary: None,
                env: Vec::new(),
                child: None,
            })
            .collect();
        let peers = nodes.iter().map(|node| format!("{}={}", node.id, node.peer_address)).collect::<Vec<_>>().join(",");
        Cluster { nodes, peers, config, open_files, tls, dir }
    }

    /// The command that starts node `id` (for tests that expect it to fail).
    pub fn node_command(&self, id: u64) -> Command {
        self.node_command_with(id, self.config.as_deref())
    }

    /// The command that starts node `id` with the configuration file `config`, if any.
    fn node_command_with(&self, id: u64, config: Option<&Path>) -> Command {
        let node = &self.nodes[(id - 1) as usize];
        let binary = node.binary.clone().unwrap_or_else(strand_binary);
        let mut command = match self.open_files {
            None => Command::new(binary),
            Some(open_files) => {
                // `ulimit -n` without -S or -H sets both limits; `exec` keeps the process id.
                let mut command = Command::new("sh");
                command.args(["-c", "ulimit -n \"$0\" && exec \"$@\"", &open_files.to_string()]).arg(binary);
                command
            }
        };
        command.envs(node.env.iter().map(|(key, value)| (key, value)));
        command
            .args(["node", "--id", &id.to_string(), "--listen", &node.address, "--listen-peer", &node.peer_address])
            .arg("--data-dir")
            .arg(&node.data_dir);
        match &node.join {
            Some(join) => {
                command.args(["--join", join]);
            }
            None if self.peers.contains(',') => {
                command.args(["--peers", &self.peers]);
            }
            None => {}
        }
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        if let Some(tls) = &self.tls {
            command.arg("--tls-cert").arg(tls.dir.join(format!("node-{id}.pem")));
            command.arg("--tls-key").arg(tls.dir.join(format!("node-{id}.key")));
            command.arg("--tls-ca").arg(tls.dir.join("ca.pem"));
            if tls.client_certificates {
                command.arg("--tls-client-ca").arg(tls.dir.join("ca.pem"));
            }
        }
        command.env("RUST_LOG", "info,openraft=warn");
        command
    }

    /// Adds a node with the next id, fresh ports and an empty data directory, and starts it with
    /// `--join` through the peer listeners of `through`, and `args`; with TLS, its certificate is
    /// issued first (`strand certs node`) unless its files are there already. Answers its id.
    pub fn join(&mut self, through: &[u64], args: &[&str]) -> u64 {
        let id = self.add_joining(through);
        self.restart_with(id, args);
        id
    }

    /// Adds a node as [`Cluster::join`] does, without starting it (`restart` starts it): its
    /// addresses are known before it runs, for `strand member add`. Answers its id.
    pub fn add_joining(&mut self, through: &[u64]) -> u64 {
        let id = self.nodes.len() as u64 + 1;
        if let Some(tls) = self.tls.as_ref().filter(|tls| !tls.dir.join(format!("node-{id}.pem")).exists()) {
            let made = Command::new(strand_binary())
                .args(["certs", "node", "--id", &id.to_string(), "--ca-dir"])
                .arg(&tls.dir)
                .arg("--dir")
                .arg(&tls.dir)
                .output()
                .expect("strand certs node runs");
            assert!(made.status.success(), "certs node: {}", String::from_utf8_lossy(&made.stderr));
        }
        let join = through.iter().map(|id| self.nodes[(id - 1) as usize].peer_address.clone()).collect::<Vec<_>>();
        self.nodes.push(NodeProcess {
            id,
            address: format!("127.0.0.1:{}", free_port()),
            peer_address: format!("127.0.0.1:{}", free_port()),
            data_dir: self.dir.path().join(format!("node-{id}")),
            join: Some(join.join(",")),
            binary: None,
            env: Vec::new(),
            child: None,
        });
        id
    }

    /// Starts (or restarts) node `id`; its log goes to `node-<id>.log` in the cluster directory.
    pub fn restart(&mut self, id: u64) {
        self.restart_with(id, &[]);
    }

    /// Starts (or restarts) node `id` with extra arguments.
    pub fn restart_with(&mut self, id: u64, args: &[&str]) {
        let config = self.config.clone();
        self.restart_with_config(id, config.as_deref(), args);
    }

    /// Starts (or restarts) node `id` with extra arguments and its own configuration file, in
    /// place of the cluster's.
    pub fn restart_with_config(&mut self, id: u64, config: Option<&Path>, args: &[&str]) {
        let log = std::fs::File::create(self.dir.path().join(format!("node-{id}.log"))).expect("log file");
        let mut command = self.node_command_with(id, config);
        command.args(args).stdout(Stdio::null()).stderr(log);
        let child = command.spawn().expect("spawn strand node");
        self.nodes[(id - 1) as usize].child = Some(child);
    }

    /// Kills node `id` with SIGKILL and waits for it to die.
    pub fn kill(&mut self, id: u64) {
        if let Some(mut child) = self.nodes[(id - 1) as usize].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends node `id` a signal by name (`STOP`, `CONT`) with `kill`; a stopped node is still
    /// killed with SIGKILL on drop.
    pub fn signal(&self, id: u64, signal: &str) {
        let child = self.nodes[(id - 1) as usize].child.as_ref().expect("node is running");
        let status = Command::new("kill").arg(format!("-{signal}")).arg(child.id().to_string()).status();
        assert!(status.as_ref().is_ok_and(|status| status.success()), "kill -{signal} node {id}: {status:?}");
    }

    /// The `--peers` every node is started with (`id=host:port` of each peer listener).
    pub fn peers(&self) -> &str {
        &self.peers
    }

    /// The cluster's temporary directory (data directories, logs, configuration files).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A node's log so far.
    pub fn log(&self, id: u64) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("node-{id}.log"))).unwrap_or_default()
    }

    /// Waits (up to [`WAIT_MAX`]) for node `id`'s process to exit by itself; its exit status.
    pub async fn wait_for_exit(&mut self, id: u64) -> std::process::ExitStatus {
        let node = &mut self.nodes[(id - 1) as usize];
        let child = node.child.as_mut().expect("the node was started");
        let status = wait_for(&format!("node {id} to exit"), || {
            let status = child.try_wait().expect("poll the node process");
            async move { status }
        })
        .await;
        node.child = None;
        status
    }

    /// The cluster id node 1 answers, once it knows it (it learns it as the cluster is made).
    pub async fn cluster_id(&self) -> u64 {
        wait_for("node 1 to know its cluster's id", || async {
            let status = self.own_status(1).await;
            (status.cluster_id != node::identity::UNBOUND).then_some(status.cluster_id)
        })
        .await
    }

    /// A raw `strand.v1.Raft` client of node `id` whose calls claim to come from `identity`.
    pub async fn peer_client(&self, id: u64, identity: PeerIdentity) -> PeerRpc {
        let address = format!("http://{}", self.nodes[(id - 1) as usize].peer_address);
        let channel =
            tonic::transport::Endpoint::from_shared(address).expect("address").connect().await.expect("connect");
        node::peer::network::peer_rpc(channel, identity)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX)
    }

    /// Every node's address.
    pub fn endpoints(&self) -> Vec<String> {
        self.nodes.iter().map(|node| node.address.clone()).collect()
    }

    /// The cluster's TLS, when it runs TLS.
    pub fn tls(&self) -> Option<&Tls> {
        self.tls.as_ref()
    }

    /// The client TLS settings for this cluster (the CA, and the client certificate).
    pub fn client_tls(&self) -> Option<api::tls::ClientTls> {
        self.tls.as_ref().map(|tls| api::tls::ClientTls {
            ca: tls.dir.join("ca.pem"),
            identity: Some((tls.dir.join("client.pem"), tls.dir.join("client.key"))),
        })
    }

    /// A client of the given endpoints.
    pub fn client_of(&self, endpoints: Vec<String>) -> Client {
        Client::new(self.client_config(endpoints)).expect("client")
    }

    /// A client of the given endpoints and `namespace` that sends `token` with every call.
    pub fn client_with_token(&self, endpoints: Vec<String>, namespace: &str, token: &str) -> Client {
        let mut config = self.client_config(endpoints);
        config.namespace = api::model::Namespace(namespace.into());
        config.token = Some(token.to_string());
        Client::new(config).expect("client")
    }

    /// The settings of this harness's clients of the given endpoints.
    fn client_config(&self, endpoints: Vec<String>) -> ClientConfig {
        let mut config = ClientConfig::new(endpoints);
        config.tls = self.client_tls();
        config.deadline = Duration::from_secs(30);
        config.attempt_timeout = Duration::from_secs(5);
        config
    }

    /// A client of every node.
    pub fn client(&self) -> Client {
        self.client_of(self.endpoints())
    }

    /// Waits until some node reports a leader that every live node agrees on; answers its id.
    pub async fn wait_for_leader(&self) -> u64 {
        let client = self.client();
        wait_for("a leader", || async {
            let status = client.status(false).await.ok()?;
            let live: Vec<_> = status.nodes.iter().filter(|node| node.state != "unreachable").collect();
            let agreed = status.leader_id != 0 && live.iter().all(|node| node.leader_id == status.leader_id);
            agreed.then_some(status.leader_id)
        })
        .await
    }

    /// Waits until the leader's controller has begun (some node applied its `Begin`), so that the
    /// log indexes later writes get do not depend on when it did.
    pub async fn wait_for_controller(&self) {
        wait_for("the leader's controller to begin", || async {
            for node in &self.nodes {
                if node.child.is_none() {
                    continue;
                }
                let (_, _, page) = http_get(&node.address, "/metrics").await;
                let term = page
                    .lines()
                    .find_map(|line| line.strip_prefix("strand_controller_term ")?.trim().parse::<u64>().ok());
                if term.is_some_and(|term| term > 0) {
                    return Some(());
                }
            }
            None
        })
        .await
    }

    /// Node `id`'s metrics page: over HTTPS with the cluster's CA when it runs TLS (and its client
    /// certificate when it requires one), else plain HTTP.
    pub async fn metrics_page(&self, id: u64) -> String {
        let address = &self.nodes[(id - 1) as usize].address;
        let Some(tls) = self.client_tls() else { return http_get(address, "/metrics").await.2 };
        let mut config = (*tls.config().expect("the cluster's client TLS files load")).clone();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let tcp = tokio::net::TcpStream::connect(address).await.expect("connect to the node");
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("a server name");
        let mut stream = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
            .connect(name, tcp)
            .await
            .expect("a TLS handshake with the node");
        let request = format!("GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("send the request");
        let mut response = Vec::new();
        // A TLS peer may close without close_notify; what arrived is the page.
        let _ = stream.read_to_end(&mut response).await;
        let response = String::from_utf8(response).expect("a text response");
        response.split_once("\r\n\r\n").map(|(_, body)| body.to_string()).unwrap_or_default()
    }

    /// Node `id`'s own status, as it answers it.
    pub async fn own_status(&self, id: u64) -> api::proto::NodeStatus {
        let client = self.client_of(vec![self.nodes[(id - 1) as usize].address.clone()]);
        let status = client.status(false).await.expect("the node answers its status");
        status.nodes.into_iter().find(|node| node.id == id).expect("the node lists itself")
    }

    /// Waits until every live node has the same applied index and state digest; answers it.
    pub async fn wait_for_convergence(&self, expected_nodes: usize) -> (u64, u64) {
        let client = self.client();
        wait_for("every node to converge", || async {
            let status = client.status(true).await.ok()?;
            let live: Vec<_> = status.nodes.iter().filter(|node| node.state != "unreachable").collect();
            let first = live.first()?;
            let same = live.iter().all(|node| node.applied_index == first.applied_index && node.digest == first.digest);
            let converged = live.len() == expected_nodes && same && first.applied_index > 0;
            converged.then_some((first.applied_index, first.digest?))
        })
        .await
    }
}

/// Writers creating beads through every node until stopped, counting acknowledged creates and
/// failed requests.
pub struct Load {
    stop: Arc<AtomicBool>,
    /// Creates acknowledged so far.
    pub acked: Arc<AtomicUsize>,
    /// Requests failed so far.
    pub failed: Arc<AtomicUsize>,
    /// The beads whose creates were acknowledged.
    pub created: Arc<std::sync::Mutex<Vec<api::model::BeadId>>>,
    writers: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// Starts `writers` writers through every node of `cluster`.
    pub fn start(cluster: &Cluster, writers: usize) -> Load {
        let (stop, acked, failed) = (Arc::new(AtomicBool::new(false)), Arc::default(), Arc::default());
        let created: Arc<std::sync::Mutex<Vec<api::model::BeadId>>> = Arc::default();
        let writers = (0..writers)
            .map(|_| {
                let counts = (Arc::clone(&acked), Arc::clone(&failed), Arc::clone(&created));
                tokio::spawn(Load::write(cluster.client(), Arc::clone(&stop), counts))
            })
            .collect();
        Load { stop, acked, failed, created, writers }
    }

    async fn write(
        client: api::client::Client,
        stop: Arc<AtomicBool>,
        (acked, failed, created): (Arc<AtomicUsize>, Arc<AtomicUsize>, Arc<std::sync::Mutex<Vec<api::model::BeadId>>>),
    ) {
        while !stop.load(Ordering::Relaxed) {
            let create = api::command::CreateBead { title: "load".into(), ..Default::default() };
            match client.execute(api::command::Command::Create(create)).await {
                Ok(api::outcome::Outcome::Bead(bead)) => {
                    created.lock().expect("the created lock is never poisoned").push(bead.id);
                    acked.fetch_add(1, Ordering::Relaxed)
                }
                other => {
                    eprintln!("a write failed: {other:?}");
                    failed.fetch_add(1, Ordering::Relaxed)
                }
            };
        }
    }

    /// Waits until `more` writes beyond those acknowledged so far are acknowledged.
    pub async fn acknowledges(&self, more: usize) {
        let target = self.acked.load(Ordering::Relaxed) + more;
        wait_for("writes to be acknowledged", || async {
            (self.acked.load(Ordering::Relaxed) >= target).then_some(())
        })
        .await;
    }

    /// Stops the writers; answers (acknowledged, failed).
    pub async fn stop(self) -> (usize, usize) {
        self.stop.store(true, Ordering::Relaxed);
        for writer in self.writers {
            writer.await.expect("a writer task ends cleanly");
        }
        (self.acked.load(Ordering::Relaxed), self.failed.load(Ordering::Relaxed))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for id in 1..=self.nodes.len() as u64 {
            self.kill(id);
        }
        if std::thread::panicking() {
            for id in 1..=self.nodes.len() as u64 {
                let log = self.log(id);
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                eprintln!("---- node {id} log (last {} lines) ----", tail.len());
                tail.iter().rev().for_each(|line| eprintln!("{line}"));
            }
        }
    }
}

/// Sends one HTTP/1.1 GET and answers the status line, the headers and the body.
pub async fn http_get(address: &str, path: &str) -> (String, String, String) {
    let mut stream = tokio::net::TcpStream::connect(address).await.expect("connect to the node");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send the request");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.expect("read the response");
    let response = String::from_utf8(response).expect("a text response");
    let (head, body) = response.split_once("\r\n\r\n").expect("headers, then a body");
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (status.to_string(), headers.to_ascii_lowercase(), body.to_string())
}

/// Polls `check` (with a short pause between polls) until it answers `Some`, or fails the test
/// after [`WAIT_MAX`].
pub async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT_MAX;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The time fields of a bead's JSON: RFC 3339 values that differ from run to run.
pub const TIME_FIELDS: [&str; 5] = ["created_at", "updated_at", "started_at", "closed_at", "defer_until"];

/// Replaces every time field (at any depth) with `"<time>"`, after checking it is RFC 3339 UTC,
/// so golden files compare what does not change between runs.
pub fn normalise_times(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Array(items) => items.iter_mut().for_each(normalise_times),
        serde_json::Value::Object(fields) => {
            for (key, field) in fields.iter_mut() {
                if TIME_FIELDS.contains(&key.as_str()) {
                    assert!(field.as_str().is_some_and(|text| text.ends_with('Z')), "{key} is RFC 3339: {field}");
                    *field = serde_json::Value::String("<time>".into());
                } else {
                    normalise_times(field);
                }
            }
        }
        _ => {}
    }
}

/// Runs the `strand` CLI against `cluster` as `actor`, with no lease id or namespace taken from
/// this process's environment.
pub fn strand_as(cluster: &Cluster, actor: &str, args: &[&str]) -> std::process::Output {
    Command::new(strand_binary())
        .args(["--endpoints", &cluster.endpoints().join(","), "--actor", actor])
        .args(args)
        .env_remove("STRAND_LEASE_ID")
        .env_remove("STRAND_NAMESPACE")
        .output()
        .expect("the strand binary runs")
}

/// The JSON a command printed; fails the test, with its stderr, unless it exited 0.
pub fn json_of(output: &std::process::Output) -> serde_json::Value {
    assert_eq!(output.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("the command printed JSON")
}

/// `strand` over TLS with `token` (or none), its global flags only from the arguments.
pub fn strand_tls(cluster: &Cluster, token: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut command = Command::new(strand_binary());
    command
        .arg("--endpoints")
        .arg(cluster.endpoints().join(","))
        .arg("--cacert")
        .arg(cluster.tls().expect("a TLS cluster").dir.join("ca.pem"))
        .args(args);
    for variable in ["STRAND_TOKEN", "STRAND_NAMESPACE", "STRAND_CONFIG", "STRAND_ACTOR"] {
        command.env_remove(variable);
    }
    if let Some(token) = token {
        command.env("STRAND_TOKEN", token);
    }
    command.output().expect("the strand binary runs")
}
