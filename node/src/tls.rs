//! TLS on the node's two listeners and on its channels to peers (rustls, ring provider).
//!
//! - The **peer listener** is always mutual TLS when TLS is on: a peer must show a certificate
//!   signed by the cluster's CA that names exactly one node (checked in the handshake), and the
//!   peer plane then requires that it name, as
//!   `strand-node-<id>`, the member its messages claim to come from ([`ConnectionInfo`]). The
//!   node dialing a peer checks in turn that the certificate it is shown names the member it meant
//!   to reach ([`api::tls::channel`] with the node name as server name).
//! - The **client listener** serves TLS with the same certificate, and requires client
//!   certificates only when `client_ca` is set.
//!
//! The files are read again when one of them changes (looked at every
//! [`RELOAD_CHECK_INTERVAL`]) or on SIGHUP, and the new certificates serve every connection
//! accepted or dialled from then on; connections already open keep theirs. A reload that fails
//! (a half-written file, a key that does not fit) is logged and the old certificates stay.
//!
//! Handshakes run in a task per connection, so a client that never finishes its handshake holds
//! up no other connection's handshake; each must finish within the connection limits'
//! handshake timeout, and until then it holds its connection slot (its ClientHello counts as
//! the handshake bytes the connection limits wait for).

use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use futures::{Stream, StreamExt};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::TlsAcceptor;
use tonic::transport::server::Connected;

use crate::config::{Listener, TlsSettings};

/// How often the certificate files are looked at for changes.
pub const RELOAD_CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// Handshakes in flight whose connections the server has not taken yet.
const ACCEPTED_QUEUE: usize = 64;

/// What the node serves and dials with, built from the files at one moment.
struct Configs {
    client: TlsAcceptor,
    peer: TlsAcceptor,
    dial: Arc<ClientConfig>,
}

/// The node's TLS: its certificate, the CAs it trusts, reloaded when the files change.
pub struct NodeTls {
    settings: TlsSettings,
    node_id: u64,
    configs: RwLock<Arc<Configs>>,
    stamps: Mutex<Vec<Option<SystemTime>>>,
}

impl NodeTls {
    /// Reads the files of `settings` for node `node_id`; refuses a certificate that does not
    /// name the node, a key that does not fit it, or a CA file without a certificate.
    pub fn load(settings: &TlsSettings, node_id: u64) -> Result<NodeTls, String> {
        let configs = build(settings, node_id)?;
        Ok(NodeTls {
            settings: settings.clone(),
            node_id,
            configs: RwLock::new(Arc::new(configs)),
            stamps: Mutex::new(stamps(settings)),
        })
    }

    fn current(&self) -> Arc<Configs> {
        self.configs.read().expect("the TLS lock is never poisoned").clone()
    }

    /// The acceptor of `listener`'s connections, with the certificates of now.
    pub fn acceptor(&self, listener: Listener) -> TlsAcceptor {
        let configs = self.current();
        match listener {
            Listener::Client => configs.client.clone(),
            Listener::Peer => configs.peer.clone(),
        }
    }

    /// The configuration this node dials its peers with, with the certificates of now.
    pub fn dial_config(&self) -> Arc<ClientConfig> {
        self.current().dial.clone()
    }

    /// Reads the files again and serves with them from now on; on an error the old
    /// certificates stay and the error is returned.
    pub fn reload(&self) -> Result<(), String> {
        // The stamps of before the files are read: a file replaced while they are read (a new
        // certificate read with the old key) differs from them, so the next look reloads again.
        let stamps_before = stamps(&self.settings);
        let built = build(&self.settings, self.node_id);
        *self.stamps.lock().expect("the TLS stamps lock is never poisoned") = stamps_before;
        *self.configs.write().expect("the TLS lock is never poisoned") = Arc::new(built?);
        Ok(())
    }

    /// Whether a file changed since the last load.
    fn changed(&self) -> bool {
        *self.stamps.lock().expect("the TLS stamps lock is never poisoned") != stamps(&self.settings)
    }

    /// Reloads on SIGHUP and when a file changes, until the node stops.
    pub async fn watch(self: Arc<Self>) {
        #[cfg(unix)]
        let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        loop {
            let why = {
                #[cfg(unix)]
                let signal = async {
                    match hangup.as_mut() {
                        Some(hangup) => hangup.recv().await,
                        None => std::future::pending().await,
                    }
                };
                #[cfg(not(unix))]
                let signal = std::future::pending::<Option<()>>();
                tokio::select! {
                    Some(()) = signal => "SIGHUP",
                    () = tokio::time::sleep(RELOAD_CHECK_INTERVAL) => {
                        if !self.changed() {
                            continue;
                        }
                        "a certificate file changed"
                    }
                }
            };
            match self.reload() {
                Ok(()) => tracing::info!(why, "TLS certificates reloaded"),
                // Not retried on every tick: only once a file changes again.
                Err(error) => {
                    tracing::warn!(why, %error, "TLS certificates not reloaded; the previous ones stay in use")
                }
            }
        }
    }
}

fn stamps(settings: &TlsSettings) -> Vec<Option<SystemTime>> {
    settings.files().iter().map(|path| std::fs::metadata(path).and_then(|meta| meta.modified()).ok()).collect()
}

fn build(settings: &TlsSettings, node_id: u64) -> Result<Configs, String> {
    let certified = api::tls::certified_key(&settings.cert, &settings.key)?;
    let names = api::tls::dns_names(&certified.cert[0]);
    let own = api::tls::node_name(node_id);
    if api::tls::named_node(&names) != Some(node_id) {
        return Err(format!(
            "the certificate {} does not name this node alone: it must hold the DNS name {own} and no other strand-node-<id> (it names {}); make node certificates with `strand certs init`",
            settings.cert.display(),
            if names.is_empty() { "nothing".to_string() } else { names.join(", ") }
        ));
    }
    // Each file is read once, so one build never mixes an old file with a new one it read twice.
    let roots = Arc::new(api::tls::read_roots(&settings.ca)?);
    let provider = api::tls::provider();
    let server = |verifier: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>, alpn: &[&[u8]]| {
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|error| format!("TLS protocol versions: {error}"))?;
        let builder = match verifier {
            Some(verifier) => builder.with_client_cert_verifier(verifier),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(certified.clone())));
        config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
        Ok::<_, String>(TlsAcceptor::from(Arc::new(config)))
    };
    let verifier = |roots: Arc<rustls::RootCertStore>, path: &PathBuf| {
        WebPkiClientVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|error| format!("the CA {} cannot verify certificates: {error}", path.display()))
    };
    let members_only: Arc<dyn rustls::server::danger::ClientCertVerifier> =
        Arc::new(MembersOnly(verifier(roots.clone(), &settings.ca)?));
    let peer = server(Some(members_only), &[api::tls::ALPN_H2])?;
    // The client listener also serves the metrics page, which Prometheus scrapes over HTTP/1.1.
    let client_alpn: &[&[u8]] = &[api::tls::ALPN_H2, b"http/1.1"];
    let client = match &settings.client_ca {
        Some(path) => server(Some(verifier(Arc::new(api::tls::read_roots(path)?), path)?), client_alpn)?,
        None => server(None, client_alpn)?,
    };
    let dial = api::tls::dialer(rustls::RootCertStore::clone(&roots), Some(certified.clone()))?.config;
    Ok(Configs { client, peer, dial })
}

/// The peer listener's client-certificate check: the CA's, and then the certificate must name
/// exactly one node (`strand-node-<id>`), so a client certificate the same CA signed, which names
/// no node, is refused in the handshake, before any message is read.
#[derive(Debug)]
struct MembersOnly(Arc<dyn rustls::server::danger::ClientCertVerifier>);

impl rustls::server::danger::ClientCertVerifier for MembersOnly {
    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        intermediates: &[rustls::pki_types::CertificateDer<'_>],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        let verified = self.0.verify_client_cert(end_entity, intermediates, now)?;
        if api::tls::named_node(&api::tls::dns_names(end_entity)).is_none() {
            return Err(rustls::Error::General(
                "the certificate names no single strand-node-<id>: only members connect to the peer listener".into(),
            ));
        }
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        signature: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, signature)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        signature: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, signature)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// What the server knows of a connection: the DNS names of the certificate its client showed
/// (`None`: no TLS, or no client certificate).
#[derive(Clone, Debug, Default)]
pub struct ConnectionInfo {
    /// The names, when a certificate was shown.
    pub names: Option<Arc<Vec<String>>>,
}

impl ConnectionInfo {
    /// The one node the certificate names as `strand-node-<id>`; `None` when it names none or
    /// several.
    pub fn node(&self) -> Option<u64> {
        self.names.as_ref().and_then(|names| api::tls::named_node(names))
    }
}

/// An accepted connection, plain or TLS.
pub enum Connection<IO> {
    /// No TLS.
    Plain(IO),
    /// TLS, with what the client's certificate says.
    Tls(Box<tokio_rustls::server::TlsStream<IO>>, ConnectionInfo),
}

impl<IO> Connected for Connection<IO> {
    type ConnectInfo = ConnectionInfo;

    fn connect_info(&self) -> ConnectionInfo {
        match self {
            Connection::Plain(_) => ConnectionInfo::default(),
            Connection::Tls(_, info) => info.clone(),
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for Connection<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Connection::Plain(io) => Pin::new(io).poll_read(cx, buf),
            Connection::Tls(io, _) => Pin::new(io.as_mut()).poll_read(cx, buf),
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Connection<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Connection::Plain(io) => Pin::new(io).poll_write(cx, buf),
            Connection::Tls(io, _) => Pin::new(io.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Connection::Plain(io) => Pin::new(io).poll_flush(cx),
            Connection::Tls(io, _) => Pin::new(io.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Connection::Plain(io) => Pin::new(io).poll_shutdown(cx),
            Connection::Tls(io, _) => Pin::new(io.as_mut()).poll_shutdown(cx),
        }
    }
}

/// The connections of `incoming`, plain when `tls` is `None`, else through a TLS handshake for
/// `listener` that must finish within `handshake_timeout` (a failed one is logged and dropped).
pub fn accept<S, IO, IE>(
    incoming: S,
    tls: Option<(Arc<NodeTls>, Listener)>,
    handshake_timeout: Duration,
) -> Pin<Box<dyn Stream<Item = Result<Connection<IO>, IE>> + Send>>
where
    S: Stream<Item = Result<IO, IE>> + Send + 'static,
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    IE: Send + 'static,
{
    let Some((tls, listener)) = tls else {
        return Box::pin(incoming.map(|accepted| accepted.map(Connection::Plain)));
    };
    let (sender, receiver) = tokio::sync::mpsc::channel(ACCEPTED_QUEUE);
    tokio::spawn(async move {
        let mut incoming = std::pin::pin!(incoming);
        loop {
            let accepted = tokio::select! {
                () = sender.closed() => return,
                accepted = incoming.next() => accepted,
            };
            let io = match accepted {
                None => return,
                Some(Err(error)) => {
                    if sender.send(Err(error)).await.is_err() {
                        return;
                    }
                    continue;
                }
                Some(Ok(io)) => io,
            };
            let (acceptor, sender) = (tls.acceptor(listener), sender.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(handshake_timeout, acceptor.accept(io)).await {
                    Ok(Ok(stream)) => {
                        let names = stream
                            .get_ref()
                            .1
                            .peer_certificates()
                            .and_then(|certs| certs.first())
                            .map(api::tls::dns_names);
                        let info = ConnectionInfo { names: names.map(Arc::new) };
                        let _ = sender.send(Ok(Connection::Tls(Box::new(stream), info))).await;
                    }
                    // A peer that fails its handshake is a misconfigured member (wrong CA, expired
                    // certificate) and must show in the log; clients' failures are their own.
                    Ok(Err(error)) if listener == Listener::Peer => {
                        tracing::warn!(%error, "a TLS handshake on the peer listener failed")
                    }
                    Ok(Err(error)) => tracing::debug!(?listener, %error, "a TLS handshake failed"),
                    Err(_) => tracing::debug!(?listener, "a TLS handshake did not finish in time"),
                }
            });
        }
    });
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(receiver))
}
