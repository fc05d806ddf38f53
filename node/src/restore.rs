//! `strand snapshot restore`: builds the data directory of one member of a new cluster from a
//! backup file (`raft_store::backup`), as `etcdutl snapshot restore` does. Every member of the new
//! cluster is restored from the same file with the same `--peers`, and then started with
//! `strand node` as usual.
//!
//! What a restored directory holds: its identity, in a new cluster whose id the restore of the
//! lowest member draws at random, so that restored nodes never talk to the old cluster nor to
//! another cluster restored from the same backup; the other members record no id and learn it
//! from that member when the cluster first runs (see `crate::identity`); the state of the backup, applied through the backup's last log id; as
//! membership, the `--peers` members, all voters, recorded at that log id; a snapshot of it all,
//! for members that fall behind; and a log purged through that log id, so the log continues after
//! it; and a vote in the term of that log id, so that the members' first election runs in the
//! term after it (a member that won a lower term would lead with entries of a later term in its
//! log, which Raft forbids).
//!
//! Invariant: the directory is new (the caller refuses a non-empty one), and the backup was
//! checked whole ([`check`]) before anything is written.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use openraft::storage::{RaftLogStorage, RaftStateMachine};
use raft_store::backup::{self, BackupHeader, Counts};
use raft_store::snapshot::{SnapshotReader, SnapshotWriter};
use raft_store::types::SnapshotMeta;
use raft_store::{Disk, FlushMode, LogStore, SnapshotFile, StateMachineStore};

use crate::config::NodeConfig;

/// What a restore made.
#[derive(Debug)]
pub struct Restored {
    /// The backup's header.
    pub header: BackupHeader,
    /// What the backup holds.
    pub counts: Counts,
    /// The new cluster's id ([`crate::identity::UNBOUND`] on every member but the lowest, which
    /// draws it).
    pub cluster_id: u64,
    /// The new cluster's members (all voters).
    pub members: Vec<u64>,
}

/// A backup file that was read and checked whole ([`check`]).
pub struct Checked {
    /// Its header.
    pub header: BackupHeader,
    /// What it holds.
    pub counts: Counts,
}

/// Reads and checks `file` whole (before anything is written, so that a bad backup leaves
/// nothing behind).
pub fn check(file: &Path) -> Result<Checked, String> {
    let (header, counts) =
        backup::inspect(file).map_err(|error| format!("{} does not check out: {error}", file.display()))?;
    Ok(Checked { header, counts })
}

/// Restores `file`, as [`check`] found it, into `disk`, the new data directory of `config.id`;
/// `drawn` is the new cluster's id, which only the lowest member records (see the module header).
pub async fn restore<D: Disk>(
    disk: Arc<D>,
    config: &NodeConfig,
    file: &Path,
    checked: Checked,
    drawn: u64,
) -> Result<Restored, String> {
    let shown = file.display();
    let Checked { header, counts } = checked;
    let io = |what: &'static str| move |error: std::io::Error| format!("cannot {what}: {error}");
    let mut opened = std::fs::File::open(file).map_err(io("read the backup"))?;
    let (_, offset) = backup::read_header(&mut std::io::BufReader::new(&mut opened)).map_err(io("read the backup"))?;
    let mut reader = SnapshotReader::at(opened, offset).map_err(io("read the backup"))?;
    let Some(last_log_id) = reader.meta.last_log_id else {
        return Err(format!("{shown} holds an empty state (no log entry applied); there is nothing to restore"));
    };
    let members = config.members();
    let nodes: BTreeMap<u64, raft_store::types::Member> =
        members.iter().map(|(id, address)| (*id, raft_store::types::Member::new(address))).collect();
    let voters: BTreeSet<u64> = members.keys().copied().collect();
    let membership = openraft::Membership::new(vec![voters.clone()], nodes)
        .map_err(|error| format!("the members given are not a valid membership: {error}"))?;
    let meta = SnapshotMeta {
        last_log_id: Some(last_log_id),
        last_membership: openraft::StoredMembership::new(Some(last_log_id), membership),
    };
    let lowest = voters.first().copied() == Some(config.id);
    let cluster_id = if lowest { drawn } else { crate::identity::UNBOUND };
    crate::identity::record(disk.as_ref(), &config.cluster_name, config.id, cluster_id)
        .map_err(io("write the data directory"))?;

    let snapshot_dir = config.data_dir.join("snapshots");
    std::fs::create_dir_all(&snapshot_dir).map_err(io("create the snapshot directory"))?;
    let path = snapshot_dir.join("restoring.snapshot");
    let mut writer = SnapshotWriter::create(&path, &meta).map_err(io("write the snapshot"))?;
    while let Some((key, value)) = reader.next_record().map_err(io("read the backup"))? {
        writer.record(&key, &value).map_err(io("write the snapshot"))?;
    }
    writer.finish().map_err(io("write the snapshot"))?;
    let mut state_machine = StateMachineStore::open(disk.clone(), &snapshot_dir).map_err(io("open the state"))?;
    let snapshot = SnapshotFile::open(&path).map_err(io("read the snapshot"))?;
    state_machine.install_snapshot(&meta, snapshot).await.map_err(io("install the state"))?;
    let mut log = LogStore::open(disk.clone(), FlushMode::Inline).map_err(io("open the log"))?;
    // A vote in the term of the backup's last entry: a member must never win a term below the
    // last entry it holds, so the first election runs in the term after it.
    let vote = raft_store::types::Vote::new(last_log_id.leader_id.term, config.id);
    log.save_vote(&vote).await.map_err(io("write the vote"))?;
    log.purge(last_log_id).await.map_err(io("start the log"))?;
    disk.sync().map_err(io("sync the data directory"))?;
    Ok(Restored { header, counts, cluster_id, members: voters.into_iter().collect() })
}
