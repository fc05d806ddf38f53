//! Backup files (`strand snapshot save`, `strand snapshot status`): a snapshot of the state
//! machine taken by one node at a linearized point, behind a header that says where it came from.
//!
//! Format: [`MAGIC`], the header's length (u32, big-endian), the header as JSON, the header's
//! CRC-32 (u32), then the node's snapshot file unchanged (see [`crate::snapshot`]: its framing,
//! record count, whole-file CRC-32 and every record's own checksum) to the end of the file. The
//! header carries the CRC-32 and length of those snapshot bytes too, so a flipped or missing
//! byte anywhere is found. Header fields are only ever added (JSON, unknown fields ignored); a
//! change of layout gets a new magic.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::codec;
use crate::snapshot::SnapshotReader;

/// The first bytes of every backup file.
pub const MAGIC: &[u8] = b"STRAND-BACKUP-1\n";
/// Largest header a reader accepts.
const HEADER_BYTES_MAX: u32 = 64 * 1024;

/// Where a backup came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupHeader {
    /// The storage format of the node that took it ([`codec::STORAGE_FORMAT`]).
    pub storage_format: u32,
    /// The id of the cluster it was taken from.
    pub cluster_id: u64,
    /// The node that took it.
    pub node_id: u64,
    /// The last log entry it includes: index and term.
    pub last_log_index: u64,
    /// The term of that entry.
    pub last_log_term: u64,
    /// When it was taken, in ms since the Unix epoch (the node's clock).
    pub created_ms: i64,
    /// Length of the snapshot bytes that follow the header.
    pub snapshot_bytes: u64,
    /// CRC-32 of those bytes.
    pub snapshot_crc32: u32,
}

/// The header as it starts a backup file: magic, length, JSON, CRC-32.
pub fn encode_header(header: &BackupHeader) -> Vec<u8> {
    let json = serde_json::to_vec(header).expect("a header always serializes");
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&(json.len() as u32).to_be_bytes());
    bytes.extend_from_slice(&json);
    bytes.extend_from_slice(&crc32fast::hash(&json).to_be_bytes());
    bytes
}

/// What a backup holds, by kind of record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Namespaces (bead stores).
    pub namespaces: u64,
    /// Beads.
    pub beads: u64,
    /// Events kept in the event logs.
    pub events: u64,
    /// Tokens (auth).
    pub tokens: u64,
    /// Every record of the state.
    pub records: u64,
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// Reads a backup's header from the start of `input`; answers it and how many bytes it took.
pub fn read_header(input: &mut impl Read) -> io::Result<(BackupHeader, u64)> {
    let mut magic = vec![0u8; MAGIC.len()];
    input
        .read_exact(&mut magic)
        .map_err(|_| invalid("the file is too short to be a Strand backup (strand snapshot save writes one)".into()))?;
    if magic != MAGIC {
        return Err(invalid("not a Strand backup file (strand snapshot save writes one)".into()));
    }
    let mut word = [0u8; 4];
    input.read_exact(&mut word).map_err(|_| invalid("the backup is cut short in its header".into()))?;
    let length = u32::from_be_bytes(word);
    if length > HEADER_BYTES_MAX {
        return Err(invalid(format!("the backup's header claims {length} bytes; the file is damaged")));
    }
    let mut json = vec![0u8; length as usize];
    input.read_exact(&mut json).map_err(|_| invalid("the backup is cut short in its header".into()))?;
    input.read_exact(&mut word).map_err(|_| invalid("the backup is cut short in its header".into()))?;
    if u32::from_be_bytes(word) != crc32fast::hash(&json) {
        return Err(invalid("the backup's header fails its checksum; the file is damaged".into()));
    }
    let header: BackupHeader = serde_json::from_slice(&json)
        .map_err(|error| invalid(format!("the backup's header does not decode ({error}); the file is damaged")))?;
    // The records of every format this build upgrades in place read as this format's (see
    // `crate::upgrade`); a restore writes them under this build's format.
    if !(crate::upgrade::OLDEST_UPGRADABLE_FORMAT..=codec::STORAGE_FORMAT).contains(&header.storage_format) {
        return Err(invalid(format!(
            "the backup was written in storage format {}, and this build reads formats {} to {}; use a build of that format",
            header.storage_format,
            crate::upgrade::OLDEST_UPGRADABLE_FORMAT,
            codec::STORAGE_FORMAT
        )));
    }
    Ok((header, (MAGIC.len() + 8 + json.len()) as u64))
}

/// Reads and checks a backup file whole: the header and its checksum, the storage format, the
/// snapshot's length and checksum, and the snapshot's own framing and checksums; answers the
/// header and the counts of what it holds.
pub fn inspect(path: &Path) -> io::Result<(BackupHeader, Counts)> {
    let mut file = File::open(path)?;
    let mut input = BufReader::new(&mut file);
    let (header, start) = read_header(&mut input)?;
    let mut hasher = crc32fast::Hasher::new();
    let mut read = 0u64;
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = input.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        read += n as u64;
    }
    if read != header.snapshot_bytes {
        return Err(invalid(format!(
            "the backup holds {read} snapshot bytes, its header says {}: the file is cut short or was added to",
            header.snapshot_bytes
        )));
    }
    if hasher.finalize() != header.snapshot_crc32 {
        return Err(invalid("the backup's snapshot fails its checksum; the file is damaged".into()));
    }
    drop(input);
    file.seek(io::SeekFrom::Start(start))?;
    let mut reader = SnapshotReader::at(file, start)?;
    let mut counts = Counts::default();
    while let Some((key, value)) = reader.next_record()? {
        counts.records += 1;
        codec::unseal(&value, &format!("snapshot record {}", counts.records))?;
        let key: api::state::RecordKey = codec::decode_plain(&key, "state record key")?;
        match key {
            api::state::RecordKey::Namespace(_) => counts.namespaces += 1,
            api::state::RecordKey::Bead(..) => counts.beads += 1,
            api::state::RecordKey::Event(..) => counts.events += 1,
            api::state::RecordKey::Token(_) => counts.tokens += 1,
            _ => {}
        }
    }
    Ok((header, counts))
}
