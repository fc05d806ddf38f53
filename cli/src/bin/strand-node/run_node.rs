//! `strand node` (one cluster member, in this process) and `strand dev` (a local cluster of
//! child processes). This is where the real world is handed to `node::run`: the TCP listener,
//! the RocksDB disk, the system clock, an OS-random seed and Ctrl-C / SIGTERM as shutdown. It
//! also raises the process's open-files limit and fits the connection limit under it.

use std::sync::Arc;
use std::time::Duration;

use node::clock::SystemClock;
use node::config::{NodeConfig, parse_peers};
use node::connections::{DESCRIPTORS_RESERVED, OPEN_FILES_RECOMMENDED_MIN, fit_to_open_files};
use node::peer::network::TcpConnector;
use node::{NodeParams, run};
use raft_store::codec::META_IDENTITY;
use raft_store::{Disk, FlushMode, RocksDisk, Space};

use cli::admin::member_args::{DevArgs, LogFormat, NodeArgs};
use cli::{CommandResult, Failure};

/// The node's log on standard error, with repeated warnings rate-limited (see
/// [`super::log_limit`]).
fn init_logging(format: LogFormat) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn"));
    // Colour only on a terminal: a log written to a file or a pipe carries no escape codes.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let registry = tracing_subscriber::registry().with(filter).with(crate::log_limit::Limiter::default());
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(colour);
    let _ = match format {
        LogFormat::Text => {
            let format = tracing_subscriber::fmt::format().with_ansi(colour);
            registry.with(layer.event_format(crate::log_limit::Annotated(format))).try_init()
        }
        LogFormat::Json => registry.with(layer.json()).try_init(),
    };
}

/// Where the Debian package installs the commented example of a node's configuration (its
/// `/etc/strand/node.toml` starts as a copy).
const CONFIG_EXAMPLE: &str = "/usr/share/doc/strand/examples/node.toml";

fn load_config(args: &NodeArgs) -> Result<NodeConfig, Failure> {
    let mut config = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|error| {
                let path = path.display();
                if error.kind() == std::io::ErrorKind::NotFound {
                    Failure::Usage(format!(
                        "--config {path} does not exist; write it from the commented example ({CONFIG_EXAMPLE} where \
                         the Debian package is installed, deploy/debian/node.toml in the source), or start without \
                         --config and give the settings as flags"
                    ))
                } else {
                    Failure::Usage(format!("cannot read --config {path}: {error}"))
                }
            })?;
            toml::from_str(&text)
                .map_err(|error| Failure::Usage(format!("--config {} is not valid: {error}", path.display())))?
        }
        None => NodeConfig::default(),
    };
    if let Some(id) = args.id {
        config.id = id;
    }
    if let Some(listen) = &args.listen {
        config.listen_client = listen.clone();
    }
    if let Some(advertise) = &args.advertise {
        config.advertise_client = Some(advertise.clone());
    }
    if let Some(listen) = &args.listen_peer {
        config.listen_peer = listen.clone();
    }
    if let Some(advertise) = &args.advertise_peer {
        config.advertise_peer = Some(advertise.clone());
    }
    if let Some(data_dir) = &args.data_dir {
        config.data_dir = data_dir.clone();
    }
    if let (Some(cert), Some(key), Some(ca)) = (&args.tls_cert, &args.tls_key, &args.tls_ca) {
        let client_ca = config.tls.as_ref().and_then(|tls| tls.client_ca.clone());
        config.tls =
            Some(node::config::TlsSettings { cert: cert.clone(), key: key.clone(), ca: ca.clone(), client_ca });
    }
    if let Some(client_ca) = &args.tls_client_ca {
        let tls = config.tls.as_mut().ok_or_else(|| {
            Failure::Usage(
                "--tls-client-ca needs TLS on: give --tls-cert, --tls-key and --tls-ca too (or [tls])".into(),
            )
        })?;
        tls.client_ca = Some(client_ca.clone());
    }
    if args.metrics_auth {
        config.metrics_auth = true;
    }
    if let Some(peers) = &args.peers {
        // This node's own entry may be left in: `validate` refuses it unless it is the address
        // this node advertises, and the node takes its own address from that, never from it.
        config.peers = parse_peers(peers).map_err(|error| Failure::Usage(error.to_string()))?;
    }
    if let Some(cluster_name) = &args.cluster_name {
        config.cluster_name = cluster_name.clone();
    }
    if let Some(id_prefix) = &args.id_prefix {
        config.id_prefix = id_prefix.clone();
    }
    if args.rejoin {
        config.rejoin = true;
    }
    if let Some(join) = &args.join {
        config.join = join.split(',').map(str::trim).filter(|address| !address.is_empty()).map(String::from).collect();
        if config.join.is_empty() {
            return Err(Failure::Usage(
                "--join needs the peer address of at least one member, e.g. --join 10.0.0.1:7500".into(),
            ));
        }
    }
    if let Some(timeout) = args.join_timeout {
        config.join_timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX).max(1);
    }
    if args.no_auto_promote {
        config.auto_promote = false;
    }
    if args.force_new_cluster {
        config.force_new_cluster = true;
    }
    config.validate().map_err(|error| Failure::Usage(error.to_string()))?;
    Ok(config)
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(_) => {
                let _ = interrupt.await;
                return;
            }
        };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}

/// The soft open-files limits tried, highest first, when the hard limit is unlimited or the
/// system refuses it: Linux's default `fs.nr_open`, a generous limit, and macOS's `OPEN_MAX`.
const OPEN_FILES_TARGETS: [u64; 3] = [1_048_576, 65_536, 10_240];

/// Raises the soft open-files limit to the hard one where allowed (else to the highest of
/// [`OPEN_FILES_TARGETS`] the system takes); answers the soft limit now, `None` when it is
/// unlimited.
#[cfg(unix)]
fn raise_open_files_limit() -> Option<u64> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let current = limit.current?;
    let hard = limit.maximum.unwrap_or(u64::MAX);
    let hard_or_targets = std::iter::once(hard).chain(OPEN_FILES_TARGETS);
    let mut refused = None;
    for target in hard_or_targets.filter(|&target| current < target && target <= hard.min(OPEN_FILES_TARGETS[0])) {
        match setrlimit(Resource::Nofile, Rlimit { current: Some(target), maximum: limit.maximum }) {
            Ok(()) => {
                tracing::info!(from = current, to = target, "raised the open-files limit");
                return Some(target);
            }
            Err(error) => refused = Some(error),
        }
    }
    if let Some(error) = refused {
        tracing::warn!(%error, current, hard, "could not raise the open-files limit");
    }
    Some(current)
}

#[cfg(not(unix))]
fn raise_open_files_limit() -> Option<u64> {
    None
}

/// Raises the open-files limit, warns when it is low, and lowers `connections_max` so that the
/// connections and the node's own files fit under it.
fn fit_open_files(config: &mut NodeConfig) {
    let Some(open_files) = raise_open_files_limit() else {
        return;
    };
    if open_files < OPEN_FILES_RECOMMENDED_MIN {
        tracing::warn!(
            open_files,
            recommended = OPEN_FILES_RECOMMENDED_MIN,
            "the open-files limit is low: a flood of connections or a large database can exhaust it; raise it with LimitNOFILE=65536 in the systemd unit, or `ulimit -n 65536` before starting the node"
        );
    }
    let (fitted, lowered) = fit_to_open_files(&config.connections, open_files);
    if lowered {
        tracing::warn!(
            configured = config.connections.connections_max,
            connections_max = fitted.connections_max,
            open_files,
            reserved = DESCRIPTORS_RESERVED,
            "lowered connections.connections_max to fit under the open-files limit beside the node's own files; raise LimitNOFILE or `ulimit -n` to serve more"
        );
    }
    config.connections = fitted;
}

/// Binds `address` (set by `flag`) and streams its accepted connections.
async fn listen(
    address: &str,
    flag: &str,
) -> Result<impl futures::Stream<Item = std::io::Result<tokio::net::TcpStream>> + Send + 'static, Failure> {
    let listener = tokio::net::TcpListener::bind(address).await.map_err(|error| {
        Failure::Refused(format!("cannot listen on {address}: {error}; free the port or choose another with {flag}"))
    })?;
    // Small request/response messages: send at once rather than wait for Nagle's algorithm.
    Ok(futures::StreamExt::map(tokio_stream::wrappers::TcpListenerStream::new(listener), |stream| {
        stream.inspect(|stream| {
            let _ = stream.set_nodelay(true);
        })
    }))
}

/// Runs `strand node`.
pub async fn run_node(args: &NodeArgs, token: Option<String>) -> CommandResult {
    let mut config = load_config(args)?;
    config.join_token = token;
    init_logging(args.log_format);
    fit_open_files(&mut config);
    // A start refused before the node took an identity leaves the directory as it found it.
    let untouched = match std::fs::read_dir(&config.data_dir) {
        Err(_) => Some(Untouched::Absent),
        Ok(mut entries) => entries.next().is_none().then_some(Untouched::Empty),
    };
    std::fs::create_dir_all(&config.data_dir).map_err(|error| {
        Failure::Refused(format!("cannot create --data-dir {}: {error}", config.data_dir.display()))
    })?;
    let disk = RocksDisk::open(&config.data_dir.join("db")).map_err(|error| {
        let dir = config.data_dir.display().to_string();
        match error.kind() {
            std::io::ErrorKind::InvalidData => {
                Failure::Refused(node::NodeError::Corrupt { dir, detail: error.to_string() }.to_string())
            }
            _ => Failure::Refused(format!("cannot open the database in {dir}: {error}")),
        }
    })?;
    let disk = Arc::new(disk);
    let data_dir = config.data_dir.clone();
    let tls = match &config.tls {
        Some(settings) => Some(Arc::new(
            node::tls::NodeTls::load(settings, config.id).map_err(|error| Failure::Usage(format!("[tls]: {error}")))?,
        )),
        None => None,
    };
    let client_incoming = listen(&config.listen_client, "--listen").await?;
    let peer_incoming = listen(&config.listen_peer, "--listen-peer").await?;
    let params = NodeParams {
        config,
        client_incoming,
        peer_incoming,
        connector: Arc::new(TcpConnector { connect_timeout: Duration::from_secs(2), tls: tls.clone() }),
        disk: disk.clone(),
        flush_mode: FlushMode::Grouped,
        clock: Arc::new(SystemClock),
        seed: rand::random(),
        shutdown: Box::pin(shutdown_signal()),
        probes: node::Probes::default(),
        tls,
    };
    let ran = run(params).await;
    if ran.is_err()
        && let Some(untouched) = untouched
        && disk.get(Space::Meta, META_IDENTITY).is_ok_and(|identity| identity.is_none())
    {
        drop(disk);
        untouched.restore(&data_dir);
    }
    // Said once, as every failure is: `error: ...` on stderr, where the log goes too.
    ran.map_err(|error| Failure::Refused(error.to_string()))?;
    Ok(true)
}

/// What a data directory was before a start: absent, or empty.
#[derive(Clone, Copy)]
enum Untouched {
    Absent,
    Empty,
}

impl Untouched {
    /// Puts `dir` back as it was, after a start that never recorded an identity in it.
    fn restore(self, dir: &std::path::Path) {
        let removed = match self {
            Untouched::Absent => std::fs::remove_dir_all(dir),
            Untouched::Empty => std::fs::read_dir(dir).and_then(|entries| {
                entries.flatten().try_for_each(|entry| match entry.file_type() {
                    Ok(kind) if kind.is_dir() => std::fs::remove_dir_all(entry.path()),
                    _ => std::fs::remove_file(entry.path()),
                })
            }),
        };
        if let Err(error) = removed {
            tracing::warn!(dir = %dir.display(), %error, "could not clear what the refused start wrote");
        }
    }
}

/// Runs `strand dev`: starts the nodes as child processes, waits for a leader, prints the
/// endpoints and stops them all on Ctrl-C, or when one exits for another reason than its removal
/// from the cluster.
pub async fn run_dev(args: &DevArgs) -> CommandResult {
    if args.nodes == 0 || args.nodes > 9 {
        return Err(Failure::Usage("--nodes must be between 1 and 9".into()));
    }
    let (client_base, peer_base) = dev_ports(args)?;
    let executable =
        std::env::current_exe().map_err(|error| Failure::Refused(format!("cannot find the strand binary: {error}")))?;
    let addresses: Vec<String> = (0..args.nodes).map(|index| format!("127.0.0.1:{}", client_base + index)).collect();
    let peer_addresses: Vec<String> = (0..args.nodes).map(|index| format!("127.0.0.1:{}", peer_base + index)).collect();
    let peers: Vec<String> =
        peer_addresses.iter().enumerate().map(|(index, address)| format!("{}={address}", index + 1)).collect();
    std::fs::create_dir_all(&args.dir)
        .map_err(|error| Failure::Refused(format!("cannot create {}: {error}", args.dir.display())))?;
    let certs = args.dir.join("certs");
    let client_toml = args.dir.join("client.toml");
    let token_file = args.dir.join("admin.token");
    if args.tls {
        cli::admin::certs::ensure(&certs, args.nodes)?;
    }
    let mut children = Vec::new();
    for (index, (address, peer_address)) in addresses.iter().zip(&peer_addresses).enumerate() {
        let id = index + 1;
        let log = std::fs::File::create(args.dir.join(format!("node-{id}.log")))
            .map_err(|error| Failure::Refused(format!("cannot create a log file: {error}")))?;
        let mut command = tokio::process::Command::new(&executable);
        command
            .args(["node", "--id", &id.to_string(), "--listen", address, "--listen-peer", peer_address])
            .arg("--data-dir")
            .arg(args.dir.join(format!("node-{id}")))
            .args(["--peers", &peers.join(",")])
            .args(if args.tls {
                vec![
                    "--tls-cert".into(),
                    certs.join(format!("node-{id}.pem")).into_os_string(),
                    "--tls-key".into(),
                    certs.join(format!("node-{id}.key")).into_os_string(),
                    "--tls-ca".into(),
                    certs.join("ca.pem").into_os_string(),
                ]
            } else {
                Vec::new()
            })
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .kill_on_drop(true);
        let child = command.spawn().map_err(|error| Failure::Refused(format!("cannot start node {id}: {error}")))?;
        children.push(child);
    }
    let mut config = api::client::ClientConfig::new(addresses.clone());
    config.deadline = Duration::from_secs(30);
    if args.tls {
        config.tls = Some(api::tls::ClientTls {
            ca: certs.join("ca.pem"),
            identity: Some((certs.join("client.pem"), certs.join("client.key"))),
        });
    }
    // A token of an earlier `--auth` run of this directory, whose data keeps auth on.
    let saved = std::fs::read_to_string(&token_file).ok().map(|text| text.trim().to_string());
    config.token = saved.clone().filter(|token| api::auth::is_well_formed(token));
    let client = api::client::Client::new(config.clone()).map_err(Failure::from)?;
    wait_for_leader(&client, &token_file).await?;
    let token = if args.auth { Some(dev_admin_token(&client, config, &token_file).await?) } else { config.token };
    if args.tls || token.is_some() {
        let mut text = format!("endpoints = {addresses:?}\n");
        if args.tls {
            text.push_str("cacert = \"certs/ca.pem\"\ncert = \"certs/client.pem\"\nkey = \"certs/client.key\"\n");
        }
        if let Some(token) = &token {
            text.push_str(&format!("token = \"{token}\"\n"));
        }
        cli::admin::certs::write_file(&client_toml, &text, token.is_some())
            .map_err(|error| Failure::Refused(format!("cannot write {}: {error}", client_toml.display())))?;
    }
    println!("strand dev: {} nodes ready, data and logs in {}", args.nodes, args.dir.display());
    println!("endpoints: {}", addresses.join(","));
    if args.tls {
        println!("TLS: mutual between the nodes, and to clients; certificates in {}", certs.display());
    }
    if token.is_some() {
        println!("auth: enabled; the admin token is in {} (and in client.toml)", token_file.display());
    }
    if args.tls || token.is_some() {
        println!(
            "export STRAND_CONFIG={}    (endpoints, TLS files and token for every strand command)",
            client_toml.display()
        );
    }
    println!("try: strand create \"my first bead\" && strand ready    (Ctrl-C stops the cluster)");
    // A member removed from the cluster exits by design; the others run on. Any other exit stops
    // the whole cluster.
    let mut running: Vec<(u64, tokio::process::Child)> = (1..).zip(children).collect();
    while !running.is_empty() {
        let (id, exited) = tokio::select! {
            _ = shutdown_signal() => break,
            exited = wait_any(&mut running) => exited,
        };
        running.retain(|(running_id, _)| *running_id != id);
        let log = std::fs::read_to_string(args.dir.join(format!("node-{id}.log"))).unwrap_or_default();
        if log.contains(&format!("node {id} was removed from cluster")) {
            eprintln!("node {id} was removed from the cluster and stopped; the others run on");
            continue;
        }
        eprintln!("a node exited (node {id} {exited}); see its log in {}; stopping", args.dir.display());
        break;
    }
    for (_, child) in &mut running {
        let _ = child.kill().await;
    }
    Ok(true)
}

/// How far above `--base-port` the peer ports of `strand dev` start without `--peer-base-port`.
const DEV_PEER_PORT_OFFSET: u64 = 100;

/// The first client port and the first peer port of `strand dev` (`--base-port`, and
/// `--peer-base-port` or [`DEV_PEER_PORT_OFFSET`] above it). Refuses port 0, a range that runs
/// past 65535, and client and peer ranges that overlap. `args.nodes` is at least 1.
fn dev_ports(args: &DevArgs) -> Result<(u64, u64), Failure> {
    let nodes = args.nodes;
    let port_max = u64::from(u16::MAX);
    let client = u64::from(args.base_port);
    let peer = args.peer_base_port.map_or(client + DEV_PEER_PORT_OFFSET, u64::from);
    if client == 0 || args.peer_base_port == Some(0) {
        return Err(Failure::Usage("--base-port and --peer-base-port must be ports from 1 to 65535".into()));
    }
    if client + nodes - 1 > port_max {
        return Err(Failure::Usage(format!(
            "--base-port {client} leaves no room for {nodes} client ports; choose a port up to {}",
            port_max + 1 - nodes
        )));
    }
    if peer + nodes - 1 > port_max {
        return Err(Failure::Usage(match args.peer_base_port {
            Some(_) => format!(
                "--peer-base-port {peer} leaves no room for {nodes} peer ports; choose a port up to {}",
                port_max + 1 - nodes
            ),
            None => format!(
                "--base-port {client} leaves no room for {nodes} peer ports {DEV_PEER_PORT_OFFSET} above it; choose a port up to {}, or give --peer-base-port",
                port_max + 1 - nodes - DEV_PEER_PORT_OFFSET
            ),
        }));
    }
    if peer < client + nodes && client < peer + nodes {
        return Err(Failure::Usage(format!(
            "the client ports {client}-{} (--base-port) and the peer ports {peer}-{} (--peer-base-port) overlap; give ports at least {nodes} apart",
            client + nodes - 1,
            peer + nodes - 1
        )));
    }
    Ok((client, peer))
}

/// Waits for the first of `children` (each with its node id) to exit: its id, and how it exited.
async fn wait_any(children: &mut [(u64, tokio::process::Child)]) -> (u64, String) {
    let waits = children.iter_mut().map(|(id, child)| Box::pin(async move { (*id, child.wait().await) }));
    match futures::future::select_all(waits).await {
        ((id, Ok(status)), _, _) => (id, status.to_string()),
        ((id, Err(error)), _, _) => (id, error.to_string()),
    }
}

/// The admin token of a dev cluster with auth: the saved one while it still works, else a new
/// one from `auth enable`, saved to `token_file`.
async fn dev_admin_token(
    client: &api::client::Client,
    mut config: api::client::ClientConfig,
    token_file: &std::path::Path,
) -> Result<String, Failure> {
    use api::outcome::Outcome;
    let Outcome::Tokens { enabled, tokens } = client.query(api::command::Query::WhoAmI).await? else {
        return Err(Failure::Refused("the dev cluster answered whoami with something else".into()));
    };
    if enabled && let (Some(token), false) = (&config.token, tokens.is_empty()) {
        return Ok(token.clone());
    }
    let (token, mut spec) = cli::admin::auth::draw(String::new(), api::auth::Role::Admin, Default::default(), None);
    spec.name = format!("dev-admin-{}", &spec.hash.fingerprint()[..6]);
    // Saved before the cluster hears of it, so an enable whose answer is lost loses no token.
    cli::admin::certs::write_file(token_file, &format!("{token}\n"), true)
        .map_err(|error| Failure::Refused(format!("cannot write {}: {error}", token_file.display())))?;
    config.token = None;
    let enabling = api::client::Client::new(config).map_err(Failure::from)?;
    enabling.execute(api::command::Command::Auth(api::auth::AuthCommand::Enable(spec))).await?;
    Ok(token)
}

async fn wait_for_leader(client: &api::client::Client, token_file: &std::path::Path) -> Result<(), Failure> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match client.status(false).await {
            Ok(status) if status.leader_id != 0 => return Ok(()),
            Err(api::client::ClientError::Refused(api::outcome::Refusal::Unauthenticated(reason))) => {
                return Err(Failure::Refused(format!(
                    "this directory's cluster has auth enabled, and {} does not hold a token it knows ({reason}); pass --dir with a fresh directory, or restore the token",
                    token_file.display()
                )));
            }
            _ => {}
        }
        if tokio::time::Instant::now() > deadline {
            return Err(Failure::Unavailable(
                "the dev cluster elected no leader within 30 s; see the node logs".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
