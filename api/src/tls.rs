//! TLS for Strand's channels: rustls with its ring provider (never OpenSSL), PEM files read from
//! disk, and a lazily connecting gRPC channel that dials TCP and then TLS itself.
//!
//! A node's certificate names the node as the DNS name `strand-node-<id>` ([`node_name`]),
//! beside the host names and addresses clients dial. Peers verify each other by that name, never
//! by host: the dialing node checks that the certificate it is shown names the member it meant
//! to reach, and the node dialed checks that the certificate it was shown names the member the
//! messages claim to come from. Clients verify a node by the host they dial.
//!
//! Every error names the file and says what to do, since it ends up in front of an operator.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tonic::transport::{Channel, Endpoint, Uri};

/// The ALPN protocol both sides offer: gRPC runs over HTTP/2.
pub const ALPN_H2: &[u8] = b"h2";
/// How a node's certificate names the node: `strand-node-<id>`.
pub const NODE_NAME_PREFIX: &str = "strand-node-";

/// The DNS name that identifies node `id` in its certificate.
pub fn node_name(id: u64) -> String {
    format!("{NODE_NAME_PREFIX}{id}")
}

/// The node id a DNS name of a certificate names, if it names one, spelled exactly as
/// [`node_name`] spells it (`strand-node-01` and `strand-node-+1` name no node).
pub fn node_id_of(name: &str) -> Option<u64> {
    let id: u64 = name.strip_prefix(NODE_NAME_PREFIX)?.parse().ok()?;
    (id != 0 && node_name(id) == name).then_some(id)
}

/// The one node a certificate's DNS names name; `None` when they name none, or more than one
/// (such a certificate could speak for several members and is never accepted as a peer's).
pub fn named_node(names: &[String]) -> Option<u64> {
    let mut ids = names.iter().filter_map(|name| node_id_of(name));
    let first = ids.next()?;
    ids.all(|id| id == first).then_some(first)
}

/// The DNS names a certificate holds (none if it does not parse).
pub fn dns_names(cert: &CertificateDer<'_>) -> Vec<String> {
    match webpki::EndEntityCert::try_from(cert) {
        Ok(parsed) => parsed.valid_dns_names().map(str::to_string).collect(),
        Err(_) => Vec::new(),
    }
}

/// The crypto provider every TLS configuration is built with.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificates of a PEM file, leaf first.
pub fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let iter = CertificateDer::pem_file_iter(path).map_err(|error| pem_error(path, "certificate", &error))?;
    let certs: Vec<_> = iter.collect::<Result<_, _>>().map_err(|error| pem_error(path, "certificate", &error))?;
    if certs.is_empty() {
        return Err(format!(
            "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----); give a certificate file, such as one `strand certs init` makes",
            path.display()
        ));
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path).map_err(|error| pem_error(path, "private key", &error))
}

/// The trusted certificate authorities of a PEM file.
pub fn read_roots(path: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs(path)? {
        roots.add(cert).map_err(|error| {
            format!(
                "{} holds a CA certificate rustls cannot use ({error}); give the CA's PEM certificate",
                path.display()
            )
        })?;
    }
    Ok(roots)
}

fn pem_error(path: &Path, what: &str, error: &rustls::pki_types::pem::Error) -> String {
    match error {
        rustls::pki_types::pem::Error::Io(error) if error.kind() == io::ErrorKind::NotFound => {
            format!(
                "{what} file {} does not exist; check the path, or make one with `strand certs init`",
                path.display()
            )
        }
        rustls::pki_types::pem::Error::NoItemsFound => {
            format!("{} holds no PEM {what}; give a PEM file, such as one `strand certs init` makes", path.display())
        }
        error => format!("cannot read the {what} in {}: {error}", path.display()),
    }
}

/// A certificate chain and its key, checked to belong together.
pub fn certified_key(cert: &Path, key: &Path) -> Result<Arc<rustls::sign::CertifiedKey>, String> {
    let chain = read_certs(cert)?;
    let private = read_key(key)?;
    rustls::sign::CertifiedKey::from_der(chain, private, &provider()).map(Arc::new).map_err(|error| {
        format!(
            "the key {} does not fit the certificate {} ({error}); give the key the certificate was made for",
            key.display(),
            cert.display()
        )
    })
}

/// The TLS files a client uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientTls {
    /// The CA that signed the nodes' certificates.
    pub ca: PathBuf,
    /// A client certificate and its key, for a cluster that requires them.
    pub identity: Option<(PathBuf, PathBuf)>,
}

/// A client configuration, and, for one without a certificate, whether a server asked for one.
#[derive(Clone, Debug)]
pub struct Dialer {
    /// The rustls configuration.
    pub config: Arc<ClientConfig>,
    /// For a client without a certificate: a resolver that notes a server's request (each
    /// connection gets a fresh one).
    certificate_asked: Option<Arc<NoCertificate>>,
}

impl From<Arc<ClientConfig>> for Dialer {
    fn from(config: Arc<ClientConfig>) -> Dialer {
        Dialer { config, certificate_asked: None }
    }
}

/// Answers a server's request for a client certificate with none, noting that it asked, so the
/// client can say what to do (under TLS 1.3 the server's refusal comes after the handshake and
/// reads as a closed connection).
#[derive(Debug, Default)]
struct NoCertificate(std::sync::atomic::AtomicBool);

impl rustls::client::ResolvesClientCert for NoCertificate {
    fn resolve(&self, _: &[&[u8]], _: &[rustls::SignatureScheme]) -> Option<Arc<rustls::sign::CertifiedKey>> {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        None
    }

    fn has_certs(&self) -> bool {
        true
    }
}

impl ClientTls {
    /// The rustls configuration these files make.
    pub fn config(&self) -> Result<Arc<ClientConfig>, String> {
        Ok(self.dialer()?.config)
    }

    /// The configuration these files make, noting a server's request for a certificate when
    /// they hold none.
    pub fn dialer(&self) -> Result<Dialer, String> {
        let identity = match &self.identity {
            Some((cert, key)) => Some(certified_key(cert, key)?),
            None => None,
        };
        dialer(read_roots(&self.ca)?, identity)
    }
}

/// A client configuration trusting `roots`, showing `identity` (a certificate and its key) when
/// given, else noting a server's request for one.
pub fn dialer(roots: RootCertStore, identity: Option<Arc<rustls::sign::CertifiedKey>>) -> Result<Dialer, String> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("TLS protocol versions: {error}"))?
        .with_root_certificates(roots);
    let asked = Arc::new(NoCertificate::default());
    let mut config = match &identity {
        Some(certified) => {
            builder.with_client_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(certified.clone())))
        }
        None => builder.with_client_cert_resolver(asked.clone()),
    };
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    let certificate_asked = identity.is_none().then_some(asked);
    Ok(Dialer { config: Arc::new(config), certificate_asked })
}

/// A lazily connecting channel over TLS for `endpoint` (an `http://host:port` endpoint: the
/// connector does the TLS itself). Each connection is made with the configuration `config`
/// gives at that moment, so reloaded certificates serve every reconnection. The server's
/// certificate must name `server_name`, or, when `None`, the host dialed. Connecting, TLS
/// handshake included, may take `connect_timeout`.
pub fn channel(
    endpoint: Endpoint,
    dialer: impl Fn() -> Dialer + Send + Sync + 'static,
    server_name: Option<String>,
    connect_timeout: Duration,
) -> Channel {
    let dialer = Arc::new(dialer);
    endpoint.connect_with_connector_lazy(tower::service_fn(move |uri: Uri| {
        let (dialer, server_name) = (dialer(), server_name.clone());
        // A certificate request is noted per connection: one node asking says nothing of others.
        let asked = dialer.certificate_asked.as_ref().map(|_| Arc::new(NoCertificate::default()));
        let config = match &asked {
            Some(asked) => {
                let mut config = (*dialer.config).clone();
                config.client_auth_cert_resolver = asked.clone();
                Arc::new(config)
            }
            None => dialer.config.clone(),
        };
        let connector = tokio_rustls::TlsConnector::from(config);
        async move {
            let host = uri.host().unwrap_or_default().trim_matches(|c| c == '[' || c == ']').to_string();
            let port = uri
                .port_u16()
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("{uri} has no port")))?;
            let name = ServerName::try_from(server_name.unwrap_or_else(|| host.clone()))
                .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error))?;
            let connect = async {
                let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
                let _ = tcp.set_nodelay(true);
                connector.connect(name, tcp).await
            };
            let stream = tokio::time::timeout(connect_timeout, connect).await.map_err(|_| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no TLS connection to {host}:{port} within {connect_timeout:?}"),
                )
            })??;
            if asked.is_some_and(|asked| asked.0.load(std::sync::atomic::Ordering::Relaxed)) {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("{host}:{port} requires a client certificate (TLS certificate required)"),
                ));
            }
            Ok::<_, io::Error>(hyper_util::rt::TokioIo::new(stream))
        }
    }))
}
