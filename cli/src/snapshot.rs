//! `strand snapshot save FILE` and `strand snapshot status FILE`: a backup of the whole state,
//! taken by one node at a linearized point (`Cluster.SnapshotSave`), and its check
//! (`raft_store::backup`): header, checksums, and what it holds, as `etcdutl snapshot status`.
//!
//! `save` writes `FILE.part` (owner-only: the state holds token hashes), syncs it, checks it
//! whole, and only then renames it to FILE; a failure removes the part and leaves no FILE. It
//! never replaces an existing FILE.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use serde_json::json;

use crate::{Cli, Failure, Outcome};

/// How long the node may take to catch up and build the snapshot before its first byte.
const SNAPSHOT_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

#[derive(Subcommand, Debug)]
pub enum SnapshotCommand {
    /// Save a backup of the whole state to FILE (needs an admin token when auth is on).
    Save {
        /// The backup file to write; it must not exist.
        file: PathBuf,
    },
    /// Check a backup file and print its header and what it holds.
    Status {
        /// The backup file.
        file: PathBuf,
    },
}

/// Runs a snapshot command.
pub async fn run(cli: &Cli, command: &SnapshotCommand) -> Outcome {
    match command {
        SnapshotCommand::Save { file } => save(cli, file).await,
        SnapshotCommand::Status { file } => status(cli, file),
    }
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

async fn save(cli: &Cli, file: &Path) -> Outcome {
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
        indicatif::ProgressBar::with_draw_target(Some(header.snapshot_bytes), indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bytes}/{total_bytes} {wide_bar} {bytes_per_sec}, {eta} left")
            .expect("the template is valid"),
    );
    while let Some(chunk) = stream.next().await? {
        write(output, &chunk)?;
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    Ok(())
}

fn status(cli: &Cli, file: &Path) -> Outcome {
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
    if cli.json {
        crate::output::print_value(&json!({
            "file": file.display().to_string(), "header": header, "counts": counts, "checksums": "ok",
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
        "  {} namespaces, {} beads, {} events, {} tokens ({} records, {} snapshot bytes)",
        counts.namespaces, counts.beads, counts.events, counts.tokens, counts.records, header.snapshot_bytes
    );
}
