//! `strand certs init`: a development CA, a certificate for each node and one for clients, made
//! with rcgen (ring; no OpenSSL), so the secure setup is also the easy one to try. `strand certs
//! node --id N --ca-dir D`: one more node's certificate under that CA, the others untouched.
//!
//! Node `i`'s certificate names it `strand-node-<i>` (how peers recognise each other, see
//! `api::tls`), `localhost`, `127.0.0.1` and `::1`, and every `--hosts` entry, and serves both
//! as server and as client (peers dial each other). The client certificate is client-only and
//! names no node, so it can never pass as a peer. Private keys are written readable by their
//! owner only. Existing files are never overwritten unless `--force` is given: a second run
//! without it changes nothing.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SanType,
};

use crate::{Cli, CommandResult, Failure};

/// Nodes `certs init` makes certificates for, at most.
pub const NODES_MAX: u64 = 99;

#[derive(Subcommand, Debug)]
pub enum CertsCommand {
    /// Make a development CA and certificates for N nodes and one client in DIR.
    Init(InitArgs),
    /// Make the certificate of one node id under an existing CA (ca.pem, ca.key in --ca-dir),
    /// for a node added to a running cluster; the other nodes' certificates stay as they are.
    Node(NodeArgs),
}

#[derive(Args, Debug)]
pub struct NodeArgs {
    /// Directory to write node-<id>.pem, node-<id>.key (and a copy of ca.pem) to.
    #[arg(long)]
    pub dir: PathBuf,
    /// The node's id.
    #[arg(long, value_parser = crate::values::parse_node_id)]
    pub id: u64,
    /// The directory holding the CA that signed the cluster's certificates (ca.pem, ca.key).
    #[arg(long)]
    pub ca_dir: PathBuf,
    /// More host names or IP addresses the node is reached at, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub hosts: Vec<String>,
    /// Replace files that already exist.
    #[arg(long)]
    pub force: bool,
}

#[derive(Args, Debug)]
pub struct InitArgs {
    /// Directory to write the files to (created if missing).
    #[arg(long)]
    pub dir: PathBuf,
    /// How many nodes (ids 1..=N).
    #[arg(long, default_value_t = 3)]
    pub nodes: u64,
    /// More host names or IP addresses the nodes are reached at, comma-separated (every node
    /// certificate names them all).
    #[arg(long, value_delimiter = ',')]
    pub hosts: Vec<String>,
    /// Sign with the CA already in this directory (its ca.pem and ca.key) instead of making a
    /// new one: new node and client certificates that every holder of ca.pem still trusts, as
    /// a rotation needs (`--dir D --ca-dir D --force` re-issues them in place).
    #[arg(long)]
    pub ca_dir: Option<PathBuf>,
    /// Replace files that already exist.
    #[arg(long)]
    pub force: bool,
}

/// One file `init` writes.
struct Output {
    name: String,
    contents: String,
    private: bool,
}

/// Runs a `certs` command.
pub fn run(cli: &Cli, command: &CertsCommand) -> CommandResult {
    let (dir, outputs, force) = match command {
        CertsCommand::Init(args) => (&args.dir, make(args)?, args.force),
        CertsCommand::Node(args) => (&args.dir, make_node(args)?, args.force),
    };
    write(dir, &outputs, force)?;
    let files: Vec<String> = outputs.iter().map(|output| dir.join(&output.name).display().to_string()).collect();
    if cli.json {
        crate::output::print_value(&serde_json::json!({ "dir": dir.display().to_string(), "files": files }));
    } else {
        println!("wrote {} files to {}:", files.len(), dir.display());
        for output in &outputs {
            println!("  {}", output.name);
        }
        println!("nodes: [tls] cert = \"node-<id>.pem\", key = \"node-<id>.key\", ca = \"ca.pem\"");
        println!(
            "clients: --cacert ca.pem (and --cert client.pem --key client.key where client certificates are required)"
        );
    }
    Ok(true)
}

fn failed(what: &str) -> impl Fn(rcgen::Error) -> Failure + '_ {
    move |error| Failure::Refused(format!("cannot make the {what}: {error}"))
}

/// Makes the certificates of `nodes` nodes in `dir` unless they are all there already (`strand
/// dev --tls` keeps them across runs).
pub fn ensure(dir: &Path, nodes: u64) -> Result<(), Failure> {
    let args = InitArgs { dir: dir.to_path_buf(), nodes, hosts: Vec::new(), ca_dir: None, force: false };
    let outputs = make(&args)?;
    if outputs.iter().all(|output| dir.join(&output.name).exists()) {
        return Ok(());
    }
    write(dir, &outputs, true)
}

/// Makes every file's contents, writing nothing.
fn make(args: &InitArgs) -> Result<Vec<Output>, Failure> {
    if args.nodes == 0 || args.nodes > NODES_MAX {
        return Err(Failure::Usage(format!("--nodes must be between 1 and {NODES_MAX}")));
    }
    let hosts = hosts(&args.hosts)?;
    let (issuer, mut outputs) = match &args.ca_dir {
        Some(ca_dir) => existing_ca(ca_dir, &args.dir)?,
        None => {
            let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(failed("CA"))?;
            ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            ca_params.key_usages =
                vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
            ca_params.distinguished_name.push(DnType::CommonName, "Strand development CA");
            let ca_key = KeyPair::generate().map_err(failed("CA key"))?;
            let ca_cert = ca_params.self_signed(&ca_key).map_err(failed("CA"))?;
            let outputs = vec![
                Output { name: "ca.pem".into(), contents: ca_cert.pem(), private: false },
                Output { name: "ca.key".into(), contents: ca_key.serialize_pem(), private: true },
            ];
            (Issuer::new(ca_params, ca_key), outputs)
        }
    };
    for id in 1..=args.nodes {
        outputs.extend(node_files(&issuer, id, &hosts)?);
    }
    let (cert, key) = leaf(&issuer, "strand-client", vec!["strand-client".into()], false)?;
    outputs.push(Output { name: "client.pem".into(), contents: cert, private: false });
    outputs.push(Output { name: "client.key".into(), contents: key, private: true });
    Ok(outputs)
}

/// The host names every node certificate names: localhost's, and `given` once checked.
fn hosts(given: &[String]) -> Result<Vec<String>, Failure> {
    let mut hosts = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    for host in given {
        let host = host.trim();
        if host.is_empty()
            || host.contains(char::is_whitespace)
            || host.contains(':') && host.parse::<std::net::IpAddr>().is_err()
        {
            return Err(Failure::Usage(format!(
                "--hosts entry {host:?} is not a host name or IP address; write e.g. --hosts 10.0.0.1,node1.example.com"
            )));
        }
        if host.starts_with(api::tls::NODE_NAME_PREFIX) {
            return Err(Failure::Usage(format!(
                "--hosts entry {host:?} would let every node's certificate speak for a member; names starting with {} are given to each node by `certs init` itself",
                api::tls::NODE_NAME_PREFIX
            )));
        }
        if !hosts.iter().any(|known| known == host) {
            hosts.push(host.to_string());
        }
    }
    Ok(hosts)
}

/// The certificate and key of node `id`, naming `strand-node-<id>` and `hosts`.
fn node_files(issuer: &Issuer<'_, KeyPair>, id: u64, hosts: &[String]) -> Result<Vec<Output>, Failure> {
    let mut names = vec![api::tls::node_name(id)];
    names.extend(hosts.iter().cloned());
    let (cert, key) = leaf(issuer, &api::tls::node_name(id), names, true)?;
    Ok(vec![
        Output { name: format!("node-{id}.pem"), contents: cert, private: false },
        Output { name: format!("node-{id}.key"), contents: key, private: true },
    ])
}

/// `certs node`: one node's files under the CA of `--ca-dir`, writing nothing.
fn make_node(args: &NodeArgs) -> Result<Vec<Output>, Failure> {
    if args.id == 0 {
        return Err(Failure::Usage("--id must be a node id above 0".into()));
    }
    let hosts = hosts(&args.hosts)?;
    let (issuer, mut outputs) = existing_ca(&args.ca_dir, &args.dir)?;
    outputs.extend(node_files(&issuer, args.id, &hosts)?);
    Ok(outputs)
}

/// The CA of `ca_dir` (ca.pem, ca.key), and the files to write for it into `dir`: a copy of
/// ca.pem when `dir` is another directory (never the key).
fn existing_ca(ca_dir: &Path, dir: &Path) -> Result<(Issuer<'static, KeyPair>, Vec<Output>), Failure> {
    let read = |name: &str| {
        let path = ca_dir.join(name);
        std::fs::read_to_string(&path).map_err(|error| {
            Failure::Usage(format!(
                "cannot read {} for --ca-dir: {error}; give the directory `certs init` wrote",
                path.display()
            ))
        })
    };
    let (cert, key) = (read("ca.pem")?, read("ca.key")?);
    let key = KeyPair::from_pem(&key).map_err(|error| {
        Failure::Usage(format!("{} is not a PEM private key: {error}", ca_dir.join("ca.key").display()))
    })?;
    let issuer = Issuer::from_ca_cert_pem(&cert, key).map_err(|error| {
        Failure::Usage(format!("{} is not a CA certificate for ca.key: {error}", ca_dir.join("ca.pem").display()))
    })?;
    let same = std::fs::canonicalize(ca_dir).ok().zip(std::fs::canonicalize(dir).ok()).is_some_and(|(a, b)| a == b);
    let outputs =
        if same { Vec::new() } else { vec![Output { name: "ca.pem".into(), contents: cert, private: false }] };
    Ok((issuer, outputs))
}

/// A certificate signed by `issuer` for `names` (DNS names, or IP addresses as IP SANs); a
/// server certificate too when `server`. Answers (certificate PEM, key PEM).
fn leaf(
    issuer: &Issuer<'_, KeyPair>,
    common_name: &str,
    names: Vec<String>,
    server: bool,
) -> Result<(String, String), Failure> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(failed(common_name))?;
    for name in names {
        params.subject_alt_names.push(match name.parse::<std::net::IpAddr>() {
            Ok(address) => SanType::IpAddress(address),
            Err(_) => SanType::DnsName(
                name.clone().try_into().map_err(|_| Failure::Usage(format!("{name:?} is not a valid DNS name")))?,
            ),
        });
    }
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = if server {
        vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth]
    } else {
        vec![ExtendedKeyUsagePurpose::ClientAuth]
    };
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate().map_err(failed(common_name))?;
    let cert = params.signed_by(&key, issuer).map_err(failed(common_name))?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Writes `outputs` into `dir`; refuses, writing nothing, when one exists and `force` is off.
fn write(dir: &Path, outputs: &[Output], force: bool) -> Result<(), Failure> {
    std::fs::create_dir_all(dir)
        .map_err(|error| Failure::Refused(format!("cannot create --dir {}: {error}", dir.display())))?;
    if !force {
        let existing: Vec<String> =
            outputs.iter().filter(|output| dir.join(&output.name).exists()).map(|output| output.name.clone()).collect();
        if !existing.is_empty() {
            return Err(Failure::Refused(format!(
                "{} already holds {}; nothing was written. Pass --force to replace them, or choose another --dir",
                dir.display(),
                existing.join(", ")
            )));
        }
    }
    for output in outputs {
        let path = dir.join(&output.name);
        write_file(&path, &output.contents, output.private)
            .map_err(|error| Failure::Refused(format!("cannot write {}: {error}", path.display())))?;
    }
    Ok(())
}

/// Writes `contents` to `path` through a temporary file and a rename, so a reloading node never
/// reads half a file; private files are readable by their owner only.
pub fn write_file(path: &Path, contents: &str, private: bool) -> std::io::Result<()> {
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let temporary = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        if private {
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        }
        let mut file = options.open(&temporary)?;
        #[cfg(unix)]
        if private {
            std::fs::set_permissions(&temporary, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        }
        std::io::Write::write_all(&mut file, contents.as_bytes())?;
        file.sync_all()?;
    }
    std::fs::rename(&temporary, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_certificates_name_their_node_and_the_hosts() {
        let args = InitArgs {
            dir: PathBuf::new(),
            nodes: 2,
            hosts: vec!["10.0.0.7".into(), "db.example".into()],
            ca_dir: None,
            force: false,
        };
        let outputs = make(&args).unwrap();
        let names: Vec<&str> = outputs.iter().map(|output| output.name.as_str()).collect();
        assert_eq!(
            names,
            ["ca.pem", "ca.key", "node-1.pem", "node-1.key", "node-2.pem", "node-2.key", "client.pem", "client.key"]
        );
        let node = &outputs[4].contents;
        let der = rustls_der(node);
        let parsed = webpki_names(&der);
        assert!(parsed.contains(&"strand-node-2".to_string()), "{parsed:?}");
        assert!(parsed.contains(&"db.example".to_string()), "{parsed:?}");
        assert!(!parsed.contains(&"strand-node-1".to_string()), "{parsed:?}");
        let client = webpki_names(&rustls_der(&outputs[6].contents));
        assert_eq!(client, ["strand-client"], "the client certificate names no node");
    }

    #[test]
    fn bad_hosts_and_node_counts_are_refused() {
        for (nodes, hosts) in
            [(0, vec![]), (100, vec![]), (3, vec!["two words".to_string()]), (3, vec!["a:b".to_string()])]
        {
            let args = InitArgs { dir: PathBuf::new(), nodes, hosts, ca_dir: None, force: false };
            assert!(matches!(make(&args), Err(Failure::Usage(_))), "{nodes} {:?}", args.hosts);
        }
    }

    fn rustls_der(pem: &str) -> Vec<u8> {
        use rustls::pki_types::pem::PemObject;
        rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap().to_vec()
    }

    fn webpki_names(der: &[u8]) -> Vec<String> {
        api::tls::dns_names(&rustls::pki_types::CertificateDer::from(der.to_vec()))
    }
}
