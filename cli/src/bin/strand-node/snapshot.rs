//! `strand snapshot save FILE` and `strand snapshot status FILE`: a backup of the whole state,
//! taken by one node at a linearized point (`Cluster.SnapshotSave`), and its check
//! (`raft_store::backup`): header, checksums, and what it holds, as `etcdutl snapshot status`.
//! `strand snapshot restore FILE --data-dir DIR --id N --peers ...`: the data directory of one
//! member of a new cluster, made from the backup (`node::restore`).
//!
//! `save` writes `FILE.part` (owner-only: the state holds token hashes), syncs it, checks it
//! whole, and only then renames it to FILE; a failure removes the part and leaves no FILE. It
//! never replaces an existing FILE.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::json;

use cli::admin::member_args::SnapshotCommand;
use cli::output::counted;
use cli::{Cli, CommandResult, Failure};

/// How long the node may take to catch up and build the snapshot before its first byte.
const SNAPSHOT_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Runs a snapshot command.
pub async fn run(cli: &Cli, command: &SnapshotCommand) -> CommandResult {
    match command {
        SnapshotCommand::Save { file } => save(cli, file).await,
        SnapshotCommand::Status { file } => status(cli, file),
        SnapshotCommand::Restore { file, data_dir, id, peers, advertise_peer, cluster_token, cluster_name } => {
            if cluster_token.is_some() {
                return Err(Failure::Usage(
                    "--cluster-token is no longer needed: the restore of the lowest member draws the new cluster's id, and the others learn it when the cluster first runs; drop the flag".into(),
                ));
            }
            let target = Target { data_dir, id: *id, peers, advertise_peer: advertise_peer.as_deref(), cluster_name };
            restore(cli, file, &target).await
        }
    }
}

/// The member a restore makes a data directory for.
struct Target<'a> {
    data_dir: &'a Path,
    id: u64,
    peers: &'a str,
    advertise_peer: Option<&'a str>,
    cluster_name: &'a str,
}

async fn restore(cli: &Cli, file: &Path, target: &Target<'_>) -> CommandResult {
    let peers = node::config::parse_peers(target.peers).map_err(|error| Failure::Usage(error.to_string()))?;
    let id = target.id;
    let own = match (peers.get(&id), target.advertise_peer) {
        (Some(listed), Some(advertised)) if listed != advertised => {
            return Err(Failure::Usage(format!(
                "--peers gives node {id} the peer address {listed}, but --advertise-peer gives {advertised}; give one address, or leave node {id} out of --peers"
            )));
        }
        (Some(listed), _) => listed.clone(),
        (None, Some(advertised)) => advertised.to_string(),
        (None, None) => {
            return Err(Failure::Usage(format!(
                "--peers leaves this node (id {id}) out and no --advertise-peer gives its peer address; add {id}=HOST:PORT to --peers, or give --advertise-peer HOST:PORT"
            )));
        }
    };
    let dir = target.data_dir;
    if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(Failure::Usage(format!(
            "--data-dir {} is not empty; nothing was written. Restore only into a new, empty directory",
            dir.display()
        )));
    }
    // Checked before the directory is made, so that a bad file leaves nothing behind.
    not_a_directory(file)?;
    let checked = node::restore::check(file).map_err(|error| refused(format!("{error}; nothing was written")))?;
    let config = node::config::NodeConfig {
        id: target.id,
        data_dir: dir.to_path_buf(),
        cluster_name: target.cluster_name.to_string(),
        advertise_peer: Some(own),
        peers,
        ..Default::default()
    };
    let disk = raft_store::RocksDisk::open(&dir.join("db"))
        .map_err(|error| refused(format!("cannot create the data directory {}: {error}", dir.display())))?;
    let drawn = node::identity::draw(rand::random());
    let restored = node::restore::restore(std::sync::Arc::new(disk), &config, file, checked, drawn)
        .await
        .map_err(|error| refused(format!("{error}; remove {} before trying again", dir.display())))?;
    let bound = restored.cluster_id != node::identity::UNBOUND;
    let lowest = restored.members.first().copied().unwrap_or(target.id);
    if cli.json() {
        let cluster_id = bound.then(|| format!("{:016x}", restored.cluster_id));
        cli::output::print_value(&json!({
            "data_dir": dir.display().to_string(), "id": target.id, "cluster_id": cluster_id,
            "members": restored.members, "last_log_index": restored.header.last_log_index, "counts": restored.counts,
        }));
    } else {
        println!(
            "restored {} into {} for node {} of a new cluster {} (members {:?}), through index {}: {} in {}",
            file.display(),
            dir.display(),
            target.id,
            if bound {
                format!("{:016x}", restored.cluster_id)
            } else {
                format!("(its id is drawn by node {lowest}'s restore, and learned when the cluster first runs)")
            },
            restored.members,
            restored.header.last_log_index,
            counted(restored.counts.beads, "bead"),
            counted(restored.counts.namespaces, "namespace")
        );
        let advertise = target.advertise_peer.map(|address| format!(" --advertise-peer {address}")).unwrap_or_default();
        println!(
            "start it with: strand node --id {} --data-dir {} --peers {}{advertise} ...",
            target.id,
            dir.display(),
            target.peers
        );
    }
    Ok(true)
}

fn refused(what: String) -> Failure {
    Failure::Refused(what)
}

/// Opens `path` for writing, new, readable by its owner only.
fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

async fn save(cli: &Cli, file: &Path) -> CommandResult {
    if file.exists() {
        return Err(Failure::Usage(format!(
            "{} exists; nothing was written. Choose another file name, or move it away first",
            file.display()
        )));
    }
    let part = PathBuf::from(format!("{}.part", file.display()));
    let mut output = create_private(&part).map_err(|error| {
        refused(format!("cannot create {}: {error} (a save of the same file may be under way)", part.display()))
    })?;
    let written = receive(cli, &mut output).await;
    let checked = written.and_then(|()| {
        output.sync_all().map_err(|error| refused(format!("cannot sync {}: {error}", part.display())))?;
        raft_store::backup::inspect(&part)
            .map_err(|error| refused(format!("the backup received does not check out: {error}; try again")))
    });
    let (header, counts) = match checked {
        Ok(checked) => checked,
        Err(failure) => {
            let _ = std::fs::remove_file(&part);
            return Err(failure);
        }
    };
    std::fs::rename(&part, file).map_err(|error| {
        let _ = std::fs::remove_file(&part);
        refused(format!("cannot rename {} to {}: {error}", part.display(), file.display()))
    })?;
    print_backup(cli, file, &header, &counts);
    Ok(true)
}

/// Receives the backup's chunks into `output`, with a progress bar on a terminal.
async fn receive(cli: &Cli, output: &mut std::fs::File) -> Result<(), Failure> {
    let mut stream = cli.client_waiting(SNAPSHOT_WAIT)?.snapshot_save().await?;
    let write = |output: &mut std::fs::File, bytes: &[u8]| {
        output.write_all(bytes).map_err(|error| refused(format!("cannot write the backup: {error}")))
    };
    let Some(first) = stream.next().await? else {
        return Err(Failure::Unavailable("the node sent no backup; try again".into()));
    };
    let (header, _) = raft_store::backup::read_header(&mut first.as_slice())
        .map_err(|error| refused(format!("the node sent a backup header this build cannot read: {error}")))?;
    write(output, &first)?;
    let bar =
        cli::output::progress(header.snapshot_bytes, "{bytes}/{total_bytes} {wide_bar} {bytes_per_sec}, {eta} left");
    while let Some(chunk) = stream.next().await? {
        write(output, &chunk)?;
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    Ok(())
}

/// Refuses a directory where a backup file is expected, saying what to give instead (a read of
/// a directory would say only that it is too short to be a backup).
fn not_a_directory(file: &Path) -> Result<(), Failure> {
    if file.is_dir() {
        return Err(refused(format!(
            "{} is a directory, not a backup; give a backup file made by `strand snapshot save FILE`",
            file.display()
        )));
    }
    Ok(())
}

fn status(cli: &Cli, file: &Path) -> CommandResult {
    not_a_directory(file)?;
    let (header, counts) = raft_store::backup::inspect(file)
        .map_err(|error| refused(format!("{} does not check out: {error}", file.display())))?;
    print_backup(cli, file, &header, &counts);
    Ok(true)
}

fn print_backup(
    cli: &Cli,
    file: &Path,
    header: &raft_store::backup::BackupHeader,
    counts: &raft_store::backup::Counts,
) {
    if cli.json() {
        cli::output::print_value(&json!({
            "file": file.display().to_string(), "header": header_json(header), "counts": counts, "checksums": "ok",
        }));
        return;
    }
    let taken = api::model::Timestamp(header.created_ms).to_rfc3339();
    println!("{}: checksums ok", file.display());
    println!(
        "  cluster {:016x}, taken by node {} at {taken}, through index {} (term {}), storage format {}",
        header.cluster_id, header.node_id, header.last_log_index, header.last_log_term, header.storage_format
    );
    println!(
        "  {}, {}, {}, {} ({}, {} snapshot bytes)",
        counted(counts.namespaces, "namespace"),
        counted(counts.beads, "bead"),
        counted(counts.events, "event"),
        counted(counts.tokens, "token"),
        counted(counts.records, "record"),
        header.snapshot_bytes
    );
}

/// A backup's header as `--json` prints it: its fields as the file holds them, but the cluster id
/// as the 16 hex digits the text prints (a hash: as a JSON number above 2^53, `jq` would round
/// it), and when it was taken as `created_at` in RFC 3339, as every time Strand prints (the file
/// keeps `created_ms`).
fn header_json(header: &raft_store::backup::BackupHeader) -> serde_json::Value {
    let raft_store::backup::BackupHeader {
        storage_format,
        cluster_id,
        node_id,
        last_log_index,
        last_log_term,
        created_ms,
        snapshot_bytes,
        snapshot_crc32,
    } = header;
    json!({
        "storage_format": storage_format, "cluster_id": format!("{cluster_id:016x}"), "node_id": node_id,
        "last_log_index": last_log_index, "last_log_term": last_log_term,
        "created_at": api::model::Timestamp(*created_ms).to_rfc3339(),
        "snapshot_bytes": snapshot_bytes, "snapshot_crc32": snapshot_crc32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backups_time_prints_as_rfc3339_and_its_cluster_id_as_hex() {
        let header = raft_store::backup::BackupHeader {
            storage_format: 9,
            cluster_id: 0x8213_de10_0ef6_cc76,
            node_id: 1,
            last_log_index: 7,
            last_log_term: 1,
            created_ms: 1_767_225_600_000,
            snapshot_bytes: 1289,
            snapshot_crc32: 42,
        };
        let json = header_json(&header);
        assert_eq!(json["created_at"], "2026-01-01T00:00:00.000Z");
        assert!(json.get("created_ms").is_none(), "{json}");
        assert_eq!(json["cluster_id"], "8213de100ef6cc76", "a hash, as the text prints it");
        assert_eq!((json["last_log_index"].as_u64(), json["snapshot_crc32"].as_u64()), (Some(7), Some(42)));
    }
}
