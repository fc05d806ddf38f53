//! Which node of which cluster a data directory belongs to, and how a node learns its cluster's
//! id.
//!
//! A cluster's id is drawn at random when the cluster is made, so that two clusters made apart
//! never share one, whatever their names and member ids:
//! - a static cluster (`--peers`): by its lowest configured id, as it initialises the cluster
//!   (`crate::bootstrap`), from the node's random seed;
//! - a restored cluster (`strand snapshot restore`): by the restore of its lowest member.
//!
//! Every other member starts *unbound*: its directory records cluster id [`UNBOUND`], and it
//! learns the id from the first vote, append or snapshot of a member it trusts (a configured
//! member, or one of a membership it was given), with TLS one whose certificate names that
//! member, which binds it for good ([`ClusterId::bind`], recorded before the message is acted
//! on). A joining node (`--join`) and a rejoining one (`--rejoin` on an empty directory) learn
//! the id and the membership from a member they ask before Raft starts (`crate::join`): the
//! member checks the cluster name and, with TLS, the certificate, and the node checks the
//! member's certificate against the host it dialled. A directory written before ids were drawn
//! keeps the id it recorded.
//!
//! An unbound node's Raft messages carry id [`UNBOUND`]. A member answers a status request of an
//! unbound member (the bootstrapping node asks whether the others are empty; a rejoining one how
//! far their logs reach), and nothing else of it; an unbound candidate wins no vote, so only a
//! bound node leads.
//!
//! Invariant: a bound node's cluster id never changes; binding is recorded durably before the
//! message that taught the id is acted on.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use raft_store::codec::{self, META_FORMAT, META_IDENTITY, STORAGE_FORMAT};
use raft_store::{Disk, Durability, Op, Space};
use serde::{Deserialize, Serialize};

use crate::NodeError;
use crate::config::NodeConfig;

/// The cluster id of a node that has not learned its cluster's id yet.
pub const UNBOUND: u64 = 0;

/// The identity recorded in a data directory (public so that the storage-format test pins it).
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The `--cluster-name` the node was first started with.
    pub cluster_name: String,
    /// The node's id.
    pub node_id: u64,
    /// The cluster id ([`UNBOUND`] until the node learns it; see the module header).
    pub cluster_id: u64,
}

/// A cluster id drawn from `seed` (a node's random seed): never [`UNBOUND`].
pub fn draw(seed: u64) -> u64 {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(seed.to_be_bytes());
    let id = u64::from_be_bytes(digest[..8].try_into().expect("a SHA-256 digest has 32 bytes"));
    if id == UNBOUND { 1 } else { id }
}

/// The cluster id a running node holds: [`UNBOUND`] until it learns it, then fixed.
pub struct ClusterId {
    id: AtomicU64,
    /// The id this node draws if it makes the cluster (see `crate::bootstrap`).
    drawn: u64,
    /// Records a learned id durably; held while binding, so two binds never race.
    record: Mutex<Box<dyn FnMut(u64) -> std::io::Result<()> + Send>>,
}

impl std::fmt::Debug for ClusterId {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "ClusterId({:016x})", self.get())
    }
}

impl ClusterId {
    /// A node's cluster id, as its directory records it (`recorded`); `drawn` is the id it draws
    /// if it makes the cluster, and `record` writes a learned id to its directory.
    pub fn new(
        recorded: u64,
        drawn: u64,
        record: impl FnMut(u64) -> std::io::Result<()> + Send + 'static,
    ) -> ClusterId {
        ClusterId { id: AtomicU64::new(recorded), drawn, record: Mutex::new(Box::new(record)) }
    }

    /// An id that is never learned or recorded (a tool's or a test's sender identity).
    pub fn fixed(id: u64) -> ClusterId {
        ClusterId::new(id, id, |_| Err(std::io::Error::other("a fixed cluster id is never recorded")))
    }

    /// The id, [`UNBOUND`] while unknown.
    pub fn get(&self) -> u64 {
        self.id.load(Ordering::Acquire)
    }

    /// Whether the id is known.
    pub fn is_bound(&self) -> bool {
        self.get() != UNBOUND
    }

    /// The id this node draws when it makes the cluster.
    pub fn drawn(&self) -> u64 {
        self.drawn
    }

    /// Binds an unbound node to `id`, recording it first; answers whether the node now belongs
    /// to `id` (false when it is bound to another, or `id` is [`UNBOUND`]).
    pub fn bind(&self, id: u64) -> std::io::Result<bool> {
        let mut record = self.record.lock().expect("the cluster id lock is never poisoned");
        let current = self.get();
        if current != UNBOUND || id == UNBOUND {
            return Ok(current == id && id != UNBOUND);
        }
        record(id)?;
        self.id.store(id, Ordering::Release);
        tracing::info!(cluster_id = format!("{id:016x}"), "this node learned its cluster's id");
        Ok(true)
    }
}

/// The identity a directory records, if any, after checking that its storage format is this
/// build's.
pub fn recorded<D: Disk>(disk: &D, config: &NodeConfig) -> Result<Option<Identity>, NodeError> {
    let dir = config.data_dir.display().to_string();
    let corrupt = |error: std::io::Error| NodeError::Corrupt { dir: dir.clone(), detail: error.to_string() };
    let identity = disk.get(Space::Meta, META_IDENTITY).map_err(corrupt)?;
    let format: Option<u32> = match disk.get(Space::Meta, META_FORMAT).map_err(corrupt)? {
        Some(bytes) => Some(codec::decode_plain(&bytes, "storage format").map_err(corrupt)?),
        None => None,
    };
    // A directory with an identity but no format key was written by a format-1 build.
    let found_format = format.or(identity.as_ref().map(|_| 1));
    if let Some(found) = found_format
        && !(raft_store::upgrade::OLDEST_UPGRADABLE_FORMAT..=STORAGE_FORMAT).contains(&found)
    {
        return Err(NodeError::IncompatibleFormat { dir, found });
    }
    let Some(bytes) = identity else { return Ok(None) };
    let found: Identity = codec::decode(&bytes, "node identity").map_err(corrupt)?;
    if (&found.cluster_name, found.node_id) != (&config.cluster_name, config.id) {
        return Err(NodeError::ForeignDataDir {
            dir,
            id: config.id,
            cluster: config.cluster_name.clone(),
            found_id: found.node_id,
            found_cluster: found.cluster_name,
        });
    }
    // Upgraded only once the directory is known to be this node's: a start with the wrong id
    // leaves another node's directory as it found it.
    if let Some(format) = found_format.filter(|format| *format < STORAGE_FORMAT) {
        tracing::info!(
            dir,
            found = format,
            to = STORAGE_FORMAT,
            "upgrading the data directory's storage format in place"
        );
        raft_store::upgrade::upgrade(disk, format).map_err(corrupt)?;
    }
    Ok(Some(found))
}

/// Records in a data directory that it is node `node_id`'s of the cluster named `cluster_name`
/// whose id is `cluster_id` ([`UNBOUND`]: not known yet), in this build's storage format.
pub fn record<D: Disk>(disk: &D, cluster_name: &str, node_id: u64, cluster_id: u64) -> std::io::Result<()> {
    let identity = Identity { cluster_name: cluster_name.to_string(), node_id, cluster_id };
    let ops = vec![
        Op::Put(Space::Meta, META_IDENTITY.to_vec(), codec::encode(&identity)?),
        Op::Put(Space::Meta, META_FORMAT.to_vec(), codec::encode_plain(&STORAGE_FORMAT)?),
    ];
    disk.write(ops, Durability::Sync)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unbound_id_binds_once_and_records_before_it_is_seen() {
        let recorded = std::sync::Arc::new(Mutex::new(Vec::new()));
        let log = recorded.clone();
        let id = ClusterId::new(UNBOUND, 99, move |id| {
            log.lock().unwrap().push(id);
            Ok(())
        });
        assert!(!id.is_bound());
        assert!(!id.bind(UNBOUND).unwrap(), "nothing binds to the unbound id");
        assert!(id.bind(7).unwrap());
        assert!(id.bind(7).unwrap(), "the same id again");
        assert!(!id.bind(8).unwrap(), "a bound id never changes");
        assert_eq!((id.get(), recorded.lock().unwrap().clone()), (7, vec![7]));
        let failing = ClusterId::new(UNBOUND, 5, |_| Err(std::io::Error::other("disk full")));
        assert!(failing.bind(5).is_err());
        assert!(!failing.is_bound(), "an id that could not be recorded is not taken");
        assert_ne!(draw(0), UNBOUND);
        assert_ne!(draw(1), draw(2));
    }

    #[test]
    fn a_new_directory_gets_the_format_and_a_format_1_directory_is_refused() {
        let config = NodeConfig::default();
        let disk = raft_store::MemoryDisk::new();
        assert_eq!(recorded(&disk, &config).expect("a new directory is accepted"), None);
        record(&disk, &config.cluster_name, config.id, UNBOUND).expect("recorded");
        let found = recorded(&disk, &config).expect("and accepted again").expect("an identity");
        assert_eq!(found.cluster_id, UNBOUND);
        let other = NodeConfig { id: 2, ..NodeConfig::default() };
        assert!(matches!(recorded(&disk, &other), Err(NodeError::ForeignDataDir { found_id: 1, .. })));

        let old = raft_store::MemoryDisk::new();
        let identity = Identity { cluster_name: config.cluster_name.clone(), node_id: config.id, cluster_id: 1 };
        let op = Op::Put(Space::Meta, META_IDENTITY.to_vec(), codec::encode(&identity).expect("encodes"));
        old.write(vec![op], Durability::Sync).expect("write");
        let error = recorded(&old, &config).expect_err("a format-1 directory is refused");
        assert!(matches!(error, NodeError::IncompatibleFormat { found: 1, .. }), "{error}");
        assert!(
            error.to_string().contains(&format!("format 1, and this build reads format {STORAGE_FORMAT}")),
            "{error}"
        );
    }

    #[test]
    fn the_previous_format_is_upgraded_in_place_and_a_newer_one_refused_naming_both() {
        let config = NodeConfig::default();
        let at_format = |format: u32| {
            let disk = raft_store::MemoryDisk::new();
            record(&disk, &config.cluster_name, config.id, 5).expect("recorded");
            let marker = Op::Put(Space::Meta, META_FORMAT.to_vec(), codec::encode_plain(&format).expect("encodes"));
            disk.write(vec![marker], Durability::Sync).expect("write");
            disk
        };
        let previous = at_format(STORAGE_FORMAT - 1);
        assert_eq!(recorded(&previous, &config).expect("upgraded").map(|found| found.cluster_id), Some(5));
        let bytes = previous.get(Space::Meta, META_FORMAT).expect("read").expect("a format");
        assert_eq!(codec::decode_plain::<u32>(&bytes, "format").expect("decodes"), STORAGE_FORMAT);
        let newer = at_format(STORAGE_FORMAT + 1);
        let error = recorded(&newer, &config).expect_err("a newer format is refused");
        let text = error.to_string();
        assert!(text.contains(&format!("format {}, and this build reads format {STORAGE_FORMAT}", STORAGE_FORMAT + 1)));
        assert!(text.contains("written by a newer build"), "{text}");
    }
}
