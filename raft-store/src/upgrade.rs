//! Upgrades a data directory written in an earlier storage format in place, at start, one format
//! at a time.
//!
//! Each step reads what it must from the directory and writes its changes together with the next
//! format's marker in **one** atomic, synced batch, so a crash at any point leaves the directory
//! wholly in one format or the next, and the next start resumes from there. A step never deletes
//! what an earlier format needs before the marker says the new format holds.
//!
//! Steps: 11 → 12, the `closed_index` space: the step writes only the new marker, and the next
//! load builds the space from the state space, as it does for any directory whose
//! `META_CLOSED_INDEX` key is absent (`crate::state_machine`). 10 → 11, apply versions. Format 11 only adds (the `ApplyVersion` state record, controller
//! actions and a command at the ends of their enums), and a state without the record applies
//! version 1, so a format-10 directory reads as it is: the step writes only the new marker.
//!
//! `STRAND_FAILPOINT_FORMAT_UPGRADE=before:N` or `after:N` aborts the process just before or just
//! after the batch of the step to format `N`: the tests kill a node at each step this way.

use std::io;

use crate::codec::{self, META_FORMAT, STORAGE_FORMAT};
use crate::disk::{Disk, Durability, Op, Space};

/// The oldest storage format this build upgrades in place.
pub const OLDEST_UPGRADABLE_FORMAT: u32 = 10;

/// The environment variable of the upgrade's failpoint (see the module's header).
pub const FAILPOINT_ENV: &str = "STRAND_FAILPOINT_FORMAT_UPGRADE";

/// The writes of the step from `from` to `from + 1`, beside the new marker.
fn step<D: Disk + ?Sized>(_disk: &D, from: u32) -> io::Result<Vec<Op>> {
    match from {
        // 10 → 11: nothing stored changes meaning (see the module's header).
        10 => Ok(Vec::new()),
        // 11 → 12: the closed-index space is built at load (see the module's header).
        11 => Ok(Vec::new()),
        _ => Err(io::Error::other(format!("no upgrade step from storage format {from}"))),
    }
}

fn failpoint(when: &str, to: u32) {
    if std::env::var(FAILPOINT_ENV).is_ok_and(|value| value == format!("{when}:{to}")) {
        eprintln!("{FAILPOINT_ENV}={when}:{to}: aborting the storage-format upgrade here");
        std::process::abort();
    }
}

/// Upgrades a directory of format `found` (at least [`OLDEST_UPGRADABLE_FORMAT`], below
/// [`STORAGE_FORMAT`]) to this build's format, step by step.
pub fn upgrade<D: Disk + ?Sized>(disk: &D, found: u32) -> io::Result<()> {
    assert!((OLDEST_UPGRADABLE_FORMAT..STORAGE_FORMAT).contains(&found), "format {found} is not upgradable");
    for from in found..STORAGE_FORMAT {
        let to = from + 1;
        let mut ops = step(disk, from)?;
        ops.push(Op::Put(Space::Meta, META_FORMAT.to_vec(), codec::encode_plain(&to)?));
        failpoint("before", to);
        disk.write(ops, Durability::Sync)?;
        tracing::info!(from, to, "upgraded the data directory's storage format");
        failpoint("after", to);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryDisk;

    #[test]
    fn each_step_writes_its_marker_and_a_finished_directory_reads_as_this_format() {
        let disk = MemoryDisk::new();
        let marker =
            Op::Put(Space::Meta, META_FORMAT.to_vec(), codec::encode_plain(&OLDEST_UPGRADABLE_FORMAT).unwrap());
        disk.write(vec![marker], Durability::Sync).unwrap();
        upgrade(&disk, OLDEST_UPGRADABLE_FORMAT).expect("upgrades");
        let format: u32 = codec::decode_plain(&disk.get(Space::Meta, META_FORMAT).unwrap().unwrap(), "format").unwrap();
        assert_eq!(format, STORAGE_FORMAT);
    }
}
