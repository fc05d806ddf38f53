//! Damage to a stopped node's storage, for the nemesis' corruption fault: a few bytes of one
//! synced value of its memory disk (a log entry, a meta value, a state record), of its current
//! snapshot file, or of its newest checkpoint (the snapshot it built) are flipped or zeroed. Every choice comes from the nemesis' seeded RNG, and the
//! description that goes to the trace names only deterministic things (a log index, a record
//! key, a byte offset), so a seed replays the same damage.
//!
//! Damage is [`Sealing::Visible`] to the store's checksums, or, under the `NoChecksum` mutation,
//! [`Sealing::Resealed`]: the damaged value's CRC (and the snapshot file's) is computed afresh
//! over the damaged bytes, which is exactly what a store without checksums would hold. The node's
//! start-up verification then cannot see it, and the checkers must.
//!
//! Invariant: only synced data is damaged, and only while the node is down (the memory disk
//! asserts that it holds no unsynced write); only values that carry a checksum are chosen (the
//! storage-format marker, the install marker and the rejoin marker carry none).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

use raft_store::codec::{self, CHECKSUM_BYTES, META_FORMAT, META_INSTALLING};
use raft_store::memory;
use raft_store::snapshot::{CHECKPOINT_DISK, SnapshotReader, SnapshotWriter};
use raft_store::{MemoryDisk, Space};
use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use crate::cluster::SimNode;

/// The state machine's current snapshot, in the node's `snapshots` directory: the one file a node
/// reads at start and sends to lagging followers (`raft_store::state_machine`).
pub const CURRENT_SNAPSHOT: &str = "snapshots/current.snapshot";
/// The node's `snapshots` directory, which holds its checkpoints (`checkpoint-<index>/db/`).
pub const SNAPSHOTS: &str = "snapshots";
/// Longest run of bytes one damage zeroes.
pub const ZEROED_BYTES_MAX: usize = 8;

/// Whether damage shows to the store's checksums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sealing {
    /// The bytes change under their checksum, as real damage does.
    Visible,
    /// The checksum is recomputed over the damaged bytes: a store without checksums.
    Resealed,
}

/// Where damage lands.
#[derive(Clone, Copy, Debug)]
enum Target {
    Value(Space),
    Snapshot,
    Checkpoint,
}

const TARGETS: [Target; 5] = [
    Target::Value(Space::Log),
    Target::Value(Space::Meta),
    Target::Value(Space::State),
    Target::Snapshot,
    Target::Checkpoint,
];

/// Damages one thing on `node`'s storage, trying the kinds of target in a seeded order until one
/// holds something; answers what it did, or `None` when the node stores nothing yet. An error
/// means the snapshot file could not be read or written, and nothing was damaged.
pub fn damage_node(rng: &mut StdRng, node: &SimNode, sealing: Sealing) -> io::Result<Option<String>> {
    let mut targets = TARGETS;
    targets.shuffle(rng);
    for target in targets {
        let done = match target {
            Target::Value(space) => damage_value(rng, &node.disk, space, sealing),
            Target::Snapshot => damage_snapshot(rng, &node.dir.path().join(CURRENT_SNAPSHOT), sealing)?,
            Target::Checkpoint => damage_checkpoint(rng, &node.dir.path().join(SNAPSHOTS), sealing)?,
        };
        if done.is_some() {
            return Ok(done);
        }
    }
    Ok(None)
}

/// Whether the value under `key` carries a checksum.
fn sealed(space: Space, key: &[u8]) -> bool {
    space != Space::Meta || (key != META_FORMAT && key != META_INSTALLING && key != node::rejoin::META_REJOINING)
}

/// Names a key for the trace.
fn describe_key(space: Space, key: &[u8]) -> String {
    match space {
        Space::Log => {
            codec::log_index(key).map_or_else(|_| format!("log key {key:?}"), |index| format!("log entry {index}"))
        }
        Space::Meta => format!("meta {:?}", String::from_utf8_lossy(key)),
        Space::State => match codec::decode_plain::<api::state::RecordKey>(key, "record key") {
            Ok(record) => format!("state record {record:?}"),
            Err(_) => format!("state key {key:?}"),
        },
        Space::ClosedIndex => format!("closed-index key {key:?}"),
    }
}

fn damage_value(rng: &mut StdRng, disk: &MemoryDisk, space: Space, sealing: Sealing) -> Option<String> {
    let keys: Vec<Vec<u8>> = disk.synced_keys(space).into_iter().filter(|key| sealed(space, key)).collect();
    let key = keys.get(rng.random_range(0..keys.len().max(1)))?;
    let mut what = String::new();
    let found = disk.corrupt(space, key, |value| what = damage_bytes(rng, value, sealing));
    assert!(found, "a synced key listed a moment ago holds a value");
    Some(format!("{}: {what}", describe_key(space, key)))
}

/// Damages `bytes`, a value sealed with its checksum; answers what changed.
fn damage_bytes(rng: &mut StdRng, bytes: &mut Vec<u8>, sealing: Sealing) -> String {
    match sealing {
        Sealing::Visible => damage_range(rng, bytes),
        Sealing::Resealed => {
            let payload = bytes.len().saturating_sub(CHECKSUM_BYTES);
            if payload == 0 {
                return "nothing: the value has no payload".into();
            }
            bytes.truncate(payload);
            let what = damage_range(rng, bytes);
            codec::seal(bytes);
            format!("{what}, checksum recomputed")
        }
    }
}

/// Flips a bit, inverts a byte or zeroes a short run, at a seeded offset of `bytes`.
fn damage_range(rng: &mut StdRng, bytes: &mut [u8]) -> String {
    if bytes.is_empty() {
        return "nothing: the value is empty".into();
    }
    let at = rng.random_range(0..bytes.len());
    match rng.random_range(0..3) {
        0 => {
            let bit = rng.random_range(0..8);
            bytes[at] ^= 1 << bit;
            format!("bit {bit} of byte {at} of {} flipped", bytes.len())
        }
        1 => {
            bytes[at] = !bytes[at];
            format!("byte {at} of {} inverted", bytes.len())
        }
        _ => {
            let end = (at + rng.random_range(1..=ZEROED_BYTES_MAX)).min(bytes.len());
            let unchanged = bytes[at..end].iter().all(|byte| *byte == 0);
            bytes[at..end].fill(0);
            let note = if unchanged { " (they already were: no change)" } else { "" };
            format!("bytes {at}..{end} of {} zeroed{note}", bytes.len())
        }
    }
}

/// Damages the snapshot file at `path`, if there is one.
fn damage_snapshot(rng: &mut StdRng, path: &Path, sealing: Sealing) -> io::Result<Option<String>> {
    if !path.exists() {
        return Ok(None);
    }
    let what = match sealing {
        Sealing::Visible => damage_file_bytes(rng, path)?,
        Sealing::Resealed => damage_snapshot_record(rng, path)?,
    };
    Ok(Some(format!("{CURRENT_SNAPSHOT}: {what}")))
}

/// Damages the newest checkpoint in `snapshots`, if there is one: its file, or under
/// [`Sealing::Resealed`] one state record's value, the file's checksum recomputed.
fn damage_checkpoint(rng: &mut StdRng, snapshots: &Path, sealing: Sealing) -> io::Result<Option<String>> {
    if !snapshots.exists() {
        return Ok(None);
    }
    let Some(checkpoint) = raft_store::state_machine::newest_checkpoint::<MemoryDisk>(snapshots)? else {
        return Ok(None);
    };
    let newest = checkpoint.snapshot.path.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let dir = checkpoint.snapshot.path.join(CHECKPOINT_DISK);
    let what = match sealing {
        Sealing::Visible => damage_file_bytes(rng, &dir.join(memory::CHECKPOINT_FILE))?,
        Sealing::Resealed => {
            let mut contents = memory::read_checkpoint(&dir)?;
            let records = contents.entry(Space::State).or_default();
            let Some(key) = records.keys().nth(rng.random_range(0..records.len().max(1))).cloned() else {
                return Ok(Some(format!("{SNAPSHOTS}/{newest}: nothing: it holds no state record")));
            };
            let value = records.get_mut(&key).expect("a key just listed holds a value");
            let what = format!("{}: {}", describe_key(Space::State, &key), damage_bytes(rng, value, Sealing::Resealed));
            memory::write_checkpoint(&dir, &contents)?;
            what
        }
    };
    Ok(Some(format!("{SNAPSHOTS}/{newest}: {what}")))
}

/// Damages a few bytes of a file in place, somewhere in the whole of it.
fn damage_file_bytes(rng: &mut StdRng, path: &Path) -> io::Result<String> {
    let mut file = File::options().read(true).write(true).open(path)?;
    let length = file.metadata()?.len();
    let at = rng.random_range(0..length.max(1));
    let mut bytes = vec![0u8; ZEROED_BYTES_MAX.min((length - at.min(length)) as usize)];
    file.seek(SeekFrom::Start(at))?;
    file.read_exact(&mut bytes)?;
    let what = damage_range(rng, &mut bytes);
    file.seek(SeekFrom::Start(at))?;
    file.write_all(&bytes)?;
    file.sync_all()?;
    Ok(format!("{what}, from byte {at} of {length}"))
}

/// Rewrites the snapshot with one record's value damaged and resealed, through the store's own
/// writer, so that the file's checksum covers the damage.
fn damage_snapshot_record(rng: &mut StdRng, path: &Path) -> io::Result<String> {
    let mut records = 0u64;
    let mut counting = SnapshotReader::new(File::open(path)?)?;
    while counting.next_record()?.is_some() {
        records += 1;
    }
    if records == 0 {
        return Ok("nothing: the snapshot holds no record".into());
    }
    let chosen = rng.random_range(0..records);
    let mut reader = SnapshotReader::new(File::open(path)?)?;
    let rewritten = path.with_extension("damaged");
    let mut writer = SnapshotWriter::create(&rewritten, &reader.meta)?;
    let (mut position, mut what) = (0u64, String::new());
    while let Some((key, mut value)) = reader.next_record()? {
        if position == chosen {
            what =
                format!("{}: {}", describe_key(Space::State, &key), damage_bytes(rng, &mut value, Sealing::Resealed));
        }
        writer.record(&key, &value)?;
        position += 1;
    }
    writer.finish()?;
    std::fs::rename(&rewritten, path)?;
    Ok(format!("record {chosen} of {records}, {what}"))
}
