//! Encoding of keys and values on disk: postcard for values, big-endian for log indexes, and the
//! fixed meta keys. A value that fails to decode is reported as corruption, never unwrapped.

use std::io;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Meta key of the vote.
pub const META_VOTE: &[u8] = b"vote";
/// Meta key of the committed log id.
pub const META_COMMITTED: &[u8] = b"committed";
/// Meta key of the last purged log id.
pub const META_PURGED: &[u8] = b"purged";
/// Meta key of the last applied log id.
pub const META_APPLIED: &[u8] = b"applied";
/// Meta key of the last applied membership.
pub const META_MEMBERSHIP: &[u8] = b"membership";
/// Meta key set while a snapshot is being installed (the state space is incomplete).
pub const META_INSTALLING: &[u8] = b"installing";
/// Meta key of the node identity (cluster name and node id) that owns the data directory.
pub const META_IDENTITY: &[u8] = b"identity";
/// Key of the storage format version a data directory was written with.
pub const META_FORMAT: &[u8] = b"format";
/// The storage format this build writes and reads. 2: standard Raft leader ids (one leader per
/// term) in votes and log ids. Directories without the key were written in format 1.
pub const STORAGE_FORMAT: u32 = 2;

/// Encodes a value.
pub fn encode<T: Serialize>(value: &T) -> io::Result<Vec<u8>> {
    postcard::to_stdvec(value).map_err(|error| io::Error::other(format!("encoding failed: {error}")))
}

/// Decodes a value read from disk; `what` names it in the corruption error.
pub fn decode<T: DeserializeOwned>(bytes: &[u8], what: &str) -> io::Result<T> {
    postcard::from_bytes(bytes)
        .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, format!("{what} is corrupt: {error}")))
}

/// The key of the log entry at `index`.
pub fn log_key(index: u64) -> Vec<u8> {
    index.to_be_bytes().to_vec()
}

/// The index of a log key.
pub fn log_index(key: &[u8]) -> io::Result<u64> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| {
        io::Error::new(io::ErrorKind::InvalidData, format!("log key of {} bytes is corrupt", key.len()))
    })?;
    Ok(u64::from_be_bytes(bytes))
}
