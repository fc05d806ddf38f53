//! Encoding of keys and values on disk: postcard for values and record keys, big-endian for log
//! indexes, and the fixed meta keys.
//!
//! Every stored value ends in a CRC-32 of what precedes it ([`encode`]), checked on every read
//! ([`decode`]): a log entry, the vote, a state record or a snapshot record whose bytes changed on
//! the disk fails loudly as corrupt instead of decoding into something else. RocksDB checks its
//! own blocks too; this check also covers the write-ahead log's replay and the simulator's disk,
//! and it is what a node's start-up verification leans on.
//! Invariant: a value that fails its checksum or does not decode is reported as corruption
//! (`InvalidData`), never unwrapped. Only the storage-format marker is stored without a checksum,
//! so that a directory of any format can be recognised.

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
/// Meta key set once the `closed_index` space holds the entries of every closed bead of the state
/// space; absent, the next start builds the space from the state space.
pub const META_CLOSED_INDEX: &[u8] = b"closed_index";
/// Key of the storage format version a data directory was written with.
pub const META_FORMAT: &[u8] = b"format";
/// The storage format this build writes and reads, defined beside the apply versions
/// (`api::version`) so that the client build names it without linking storage.
pub use api::version::STORAGE_FORMAT;
/// Bytes of the checksum that ends every stored value.
pub const CHECKSUM_BYTES: usize = 4;

/// The CRC-32 of `bytes`.
pub fn checksum(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

fn corrupt(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// Encodes a value and appends its checksum.
pub fn encode<T: Serialize>(value: &T) -> io::Result<Vec<u8>> {
    let mut bytes = encode_plain(value)?;
    seal(&mut bytes);
    Ok(bytes)
}

/// Appends the checksum of `bytes` to them.
pub fn seal(bytes: &mut Vec<u8>) {
    let sum = checksum(bytes);
    bytes.extend_from_slice(&sum.to_le_bytes());
}

/// The payload of a sealed value, once its checksum matches; `what` names it in the error.
pub fn unseal<'a>(bytes: &'a [u8], what: &str) -> io::Result<&'a [u8]> {
    let Some(split) = bytes.len().checked_sub(CHECKSUM_BYTES) else {
        return Err(corrupt(format!("{what} is corrupt: {} bytes, shorter than its checksum", bytes.len())));
    };
    let (payload, stored) = bytes.split_at(split);
    let stored = u32::from_le_bytes(stored.try_into().expect("split at CHECKSUM_BYTES from the end"));
    let computed = checksum(payload);
    if stored != computed {
        return Err(corrupt(format!(
            "{what} is corrupt: checksum mismatch (stored {stored:08x}, computed {computed:08x})"
        )));
    }
    Ok(payload)
}

/// Decodes a value read from disk after checking its checksum; `what` names it in the error.
pub fn decode<T: DeserializeOwned>(bytes: &[u8], what: &str) -> io::Result<T> {
    decode_plain(unseal(bytes, what)?, what)
}

/// Encodes a value without a checksum: record keys (their bytes order the state space) and the
/// storage-format marker.
pub fn encode_plain<T: Serialize>(value: &T) -> io::Result<Vec<u8>> {
    postcard::to_stdvec(value).map_err(|error| io::Error::other(format!("encoding failed: {error}")))
}

/// Decodes a value written by [`encode_plain`].
pub fn decode_plain<T: DeserializeOwned>(bytes: &[u8], what: &str) -> io::Result<T> {
    postcard::from_bytes(bytes).map_err(|error| corrupt(format!("{what} is corrupt: {error}")))
}

/// The key of the log entry at `index`.
pub fn log_key(index: u64) -> Vec<u8> {
    index.to_be_bytes().to_vec()
}

/// The index of a log key.
pub fn log_index(key: &[u8]) -> io::Result<u64> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| corrupt(format!("log key of {} bytes is corrupt", key.len())))?;
    Ok(u64::from_be_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_round_trips_and_any_flipped_bit_is_refused() {
        let value = (7u64, "a bead".to_string(), vec![1u8, 2, 3]);
        let bytes = encode(&value).expect("encodes");
        assert_eq!(decode::<(u64, String, Vec<u8>)>(&bytes, "test value").expect("decodes"), value);
        for position in 0..bytes.len() {
            for bit in 0..8 {
                let mut damaged = bytes.clone();
                damaged[position] ^= 1 << bit;
                let error = decode::<(u64, String, Vec<u8>)>(&damaged, "test value").expect_err("refused");
                assert_eq!(error.kind(), io::ErrorKind::InvalidData);
                assert!(error.to_string().contains("test value is corrupt"), "{error}");
            }
        }
        for length in 0..bytes.len() {
            assert!(decode::<(u64, String, Vec<u8>)>(&bytes[..length], "test value").is_err(), "cut at {length}");
        }
    }

    #[test]
    fn plain_values_carry_no_checksum() {
        let bytes = encode_plain(&STORAGE_FORMAT).expect("encodes");
        assert_eq!(decode_plain::<u32>(&bytes, "format").expect("decodes"), STORAGE_FORMAT);
        assert_eq!(encode(&STORAGE_FORMAT).expect("encodes").len(), bytes.len() + CHECKSUM_BYTES);
    }
}
