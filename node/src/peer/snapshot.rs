//! Receiving a snapshot from the leader: its header first (which the service checks before
//! anything is written), then its chunks into a file under the size and time caps, then a read
//! through the whole file on the blocking pool before openraft may install it.
//!
//! Invariant: a snapshot that outgrows `snapshot_receive_bytes_max` or
//! `snapshot_receive_timeout_ms` while it arrives, or fails its checksums, is refused and its
//! file deleted at once; nothing is replaced before it has been read through whole.

use std::path::{Path, PathBuf};
use std::time::Duration;

use api::proto::SnapshotChunk;
use futures::StreamExt;
use raft_store::Disk;
use raft_store::types::{SnapshotMeta, Vote};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;
use tonic::{Status, Streaming};

use crate::core::NodeCore;

/// The name every incoming snapshot file starts with; such files left by a crash are removed at
/// start (`node::run`).
pub const INCOMING_SNAPSHOT_PREFIX: &str = "incoming-";

/// Numbers incoming snapshot files so two transfers in the same millisecond never share a file.
fn next_incoming_number() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// When a snapshot that starts arriving now must have arrived whole.
pub fn deadline<D: Disk>(core: &NodeCore<D>) -> (Instant, Duration) {
    let timeout = Duration::from_millis(core.config.raft.snapshot_receive_timeout_ms);
    (Instant::now() + timeout, timeout)
}

/// The first message of a snapshot stream, which must arrive by `deadline`: the vote it is sent
/// under and its metadata.
pub async fn header(
    chunks: &mut Streaming<SnapshotChunk>,
    (deadline, timeout): (Instant, Duration),
) -> Result<(Vote, SnapshotMeta), Status> {
    let first = tokio::time::timeout_at(deadline, chunks.message())
        .await
        .map_err(|_| Status::deadline_exceeded(format!("no snapshot header arrived within {timeout:?}")))??
        .ok_or_else(|| Status::invalid_argument("empty snapshot stream"))?;
    postcard::from_bytes(&first.meta)
        .map_err(|error| Status::invalid_argument(format!("malformed snapshot header: {error}")))
}

/// Receives the rest of a snapshot stream into a new file by `deadline`; on any failure the file
/// is deleted before this returns.
pub async fn receive<D: Disk>(
    core: &NodeCore<D>,
    chunks: Streaming<SnapshotChunk>,
    (deadline, timeout): (Instant, Duration),
) -> Result<PathBuf, Status> {
    let settings = &core.config.raft;
    let unique = core.clock.now().0;
    let name = format!("{INCOMING_SNAPSHOT_PREFIX}{unique}-{}.snapshot", next_incoming_number());
    let path = core.config.data_dir.join("snapshots").join(name);
    let writing = write_chunks(&path, chunks, settings.snapshot_receive_bytes_max);
    let received = tokio::time::timeout_at(deadline, writing).await;
    let received = received.unwrap_or_else(|_| {
        Err(Status::deadline_exceeded(format!(
            "the snapshot did not arrive within snapshot_receive_timeout_ms ({timeout:?}); raise it on this node for a large state"
        )))
    });
    if received.is_err() {
        let _ = tokio::fs::remove_file(&path).await;
    }
    received.map(|()| path)
}

async fn write_chunks(path: &Path, mut chunks: Streaming<SnapshotChunk>, bytes_max: u64) -> Result<(), Status> {
    let mut file = tokio::fs::File::create(path).await.map_err(|error| Status::internal(error.to_string()))?;
    let mut received = 0u64;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        received += chunk.data.len() as u64;
        if received > bytes_max {
            return Err(Status::resource_exhausted(format!(
                "the snapshot is over snapshot_receive_bytes_max ({bytes_max} bytes); raise it on this node if the state is really that large"
            )));
        }
        file.write_all(&chunk.data).await.map_err(|error| Status::internal(error.to_string()))?;
    }
    file.sync_all().await.map_err(|error| Status::internal(error.to_string()))
}

/// Reads a received snapshot through (framing, count, checksums) on the blocking pool, and
/// checks it against the metadata it was sent with; deletes it when it fails.
pub async fn verify(path: PathBuf, meta: &SnapshotMeta) -> Result<(), Status> {
    let checked = path.clone();
    let verified = tokio::task::spawn_blocking(move || raft_store::snapshot::verify(&checked))
        .await
        .map_err(|error| Status::internal(format!("snapshot verification did not finish: {error}")))?;
    let problem = match verified {
        Ok(file_meta) if &file_meta == meta => None,
        Ok(_) => Some("its file does not match the metadata it was sent with".to_string()),
        Err(error) => Some(error.to_string()),
    };
    if let Some(problem) = problem {
        let _ = std::fs::remove_file(&path);
        return Err(Status::data_loss(format!("received snapshot is damaged ({problem}); the sender will retry")));
    }
    Ok(())
}
