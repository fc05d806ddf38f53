//! [`RocksDisk`]: the storage trait over RocksDB, one column family per [`Space`].
//!
//! Writes go to RocksDB's write-ahead log, buffered in memory (manual WAL flush); a `Sync` write,
//! or [`Disk::sync`] (a WAL flush with fsync), writes the buffer out and makes them durable.
//! RocksDB checks block checksums on every read (`paranoid_checks`), so a damaged file fails
//! loudly instead of serving wrong data.
//!
//! Recovery refuses damage instead of truncating past it: the write-ahead log is replayed with
//! `TolerateCorruptedTailRecords`, which accepts only an incomplete record at the very end (a
//! write torn by a crash) and fails the open on a checksum mismatch anywhere, where RocksDB's
//! default (point-in-time recovery) would silently drop everything after it. The manifest tracks
//! the write-ahead log files, so a missing one fails the open too. The log mark
//! ([`Disk::write_mark`]) lives in the file [`MARK_FILE`] inside the database directory, written
//! to a temporary file, synced and renamed, so it is always whole.
//!
//! A checkpoint ([`Disk::checkpoint`]) is RocksDB's: the memtables are flushed, then the table
//! files are hard-linked into the checkpoint's directory (so it must be on the same filesystem),
//! and it is opened read-only to be read. Its cost is the flush and the links, not the contents.
//! Until the checkpoint is deleted, its links keep table files that compaction has since replaced.

use std::io;
use std::io::Write;
use std::path::{Path, PathBuf};

use rocksdb::{
    ColumnFamilyDescriptor, DB, DBCompressionType, DBRecoveryMode, Direction, IteratorMode, Options, ReadOptions,
    WriteBatch, WriteOptions,
};

use crate::codec;
use crate::disk::{Disk, DiskView, Durability, Op, Space, Visit};

/// The log mark's file, inside the database directory (RocksDB leaves names it did not make alone).
pub const MARK_FILE: &str = "STRAND-LOG-MARK";

/// Most table (SST) files RocksDB keeps open; others are opened as needed. The state is read
/// from RocksDB only at start and for snapshots (it lives in memory), so a small table cache
/// costs little.
/// Bounded so that a node's file descriptors stay countable: `node::connections` reserves this
/// many beside its inbound connections under the open-files limit.
pub const TABLE_FILES_OPEN_MAX: i32 = 128;
/// Most table files an open checkpoint keeps open (a snapshot being sent or verified).
pub const CHECKPOINT_TABLE_FILES_OPEN_MAX: i32 = 32;

/// A RocksDB database holding one node's log, meta and state.
pub struct RocksDisk {
    db: DB,
    path: PathBuf,
}

fn to_io(error: rocksdb::Error) -> io::Error {
    io::Error::new(error_kind(&error), format!("rocksdb: {error}"))
}

/// A RocksDB error of an operation on `what`, saying what failed.
fn to_io_on(what: std::fmt::Arguments<'_>) -> impl FnOnce(rocksdb::Error) -> io::Error {
    let what = what.to_string();
    move |error| io::Error::new(error_kind(&error), format!("{what}: rocksdb: {error}"))
}

fn error_kind(error: &rocksdb::Error) -> io::ErrorKind {
    match error.kind() {
        rocksdb::ErrorKind::Corruption => io::ErrorKind::InvalidData,
        _ => io::ErrorKind::Other,
    }
}

impl RocksDisk {
    /// Opens (creating if needed) the database under `path`.
    pub fn open(path: &Path) -> io::Result<RocksDisk> {
        let mut options = Options::default();
        options.create_if_missing(true);
        options.create_missing_column_families(true);
        options.set_paranoid_checks(true);
        options.set_compression_type(DBCompressionType::None);
        options.set_max_background_jobs(2);
        options.set_max_open_files(TABLE_FILES_OPEN_MAX);
        // Buffered writes stay in RocksDB's WAL buffer until the next sync (a synced write, or
        // `flush_wal`), which is all `Durability::Buffered` promises: a node writes its log
        // append, commit index and applied batch with one `write` call per group sync instead
        // of one each.
        options.set_manual_wal_flush(true);
        // Refuse a damaged write-ahead log rather than truncate it at the damage: only a record
        // torn at the very end (an unsynced write cut by a crash) is tolerated.
        options.set_wal_recovery_mode(DBRecoveryMode::TolerateCorruptedTailRecords);
        options.set_track_and_verify_wals_in_manifest(true);
        let db = DB::open_cf_descriptors(&options, path, families()).map_err(to_io)?;
        Ok(RocksDisk { db, path: path.to_path_buf() })
    }

    fn family(&self, space: Space) -> io::Result<&rocksdb::ColumnFamily> {
        family(&self.db, space)
    }
}

/// The column families, one per space, with their options.
fn families() -> impl Iterator<Item = ColumnFamilyDescriptor> {
    Space::ALL.iter().map(|space| {
        let mut family_options = Options::default();
        family_options.set_compression_type(DBCompressionType::None);
        ColumnFamilyDescriptor::new(space.name(), family_options)
    })
}

fn family(db: &DB, space: Space) -> io::Result<&rocksdb::ColumnFamily> {
    db.cf_handle(space.name()).ok_or_else(|| io::Error::other(format!("column family {} is missing", space.name())))
}

fn scan_iterator<'a>(
    iterator: impl Iterator<Item = Result<(Box<[u8]>, Box<[u8]>), rocksdb::Error>> + 'a,
    to: Option<&[u8]>,
    visit: Visit<'_>,
) -> io::Result<()> {
    for item in iterator {
        let (key, value) = item.map_err(to_io)?;
        if to.is_some_and(|end| key.as_ref() >= end) {
            break;
        }
        if !visit(&key, &value)? {
            break;
        }
    }
    Ok(())
}

/// [`Disk::keys`] on `family` of `db`, through `snapshot` when given: a raw iterator between the
/// bounds, so that no value is read.
fn range_keys(
    db: &DB,
    family: &rocksdb::ColumnFamily,
    snapshot: Option<&rocksdb::Snapshot<'_>>,
    range: (&[u8], &[u8]),
    reverse: bool,
    limit: usize,
) -> io::Result<Vec<Vec<u8>>> {
    let mut read_options = ReadOptions::default();
    read_options.set_iterate_lower_bound(range.0.to_vec());
    read_options.set_iterate_upper_bound(range.1.to_vec());
    if let Some(snapshot) = snapshot {
        read_options.set_snapshot(snapshot);
    }
    let mut iterator = db.raw_iterator_cf_opt(family, read_options);
    if reverse {
        iterator.seek_to_last();
    } else {
        iterator.seek_to_first();
    }
    let mut keys = Vec::new();
    while keys.len() < limit
        && let Some(key) = iterator.key()
    {
        keys.push(key.to_vec());
        if reverse {
            iterator.prev();
        } else {
            iterator.next();
        }
    }
    iterator.status().map_err(to_io)?;
    Ok(keys)
}

impl Disk for RocksDisk {
    const BLOCKS: bool = true;

    fn write(&self, ops: Vec<Op>, durability: Durability) -> io::Result<()> {
        let mut batch = WriteBatch::default();
        for op in ops {
            match op {
                Op::Put(space, key, value) => batch.put_cf(self.family(space)?, key, value),
                Op::Delete(space, key) => batch.delete_cf(self.family(space)?, key),
                Op::DeleteRange(space, from, to) => batch.delete_range_cf(self.family(space)?, from, to),
            }
        }
        let mut write_options = WriteOptions::default();
        write_options.set_sync(durability == Durability::Sync);
        self.db.write_opt(batch, &write_options).map_err(to_io)
    }

    fn sync(&self) -> io::Result<()> {
        self.db.flush_wal(true).map_err(to_io)
    }

    fn get(&self, space: Space, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        self.db.get_cf(self.family(space)?, key).map_err(to_io)
    }

    fn scan(&self, space: Space, from: &[u8], to: Option<&[u8]>, visit: Visit<'_>) -> io::Result<()> {
        let iterator = self.db.iterator_cf(self.family(space)?, IteratorMode::From(from, Direction::Forward));
        scan_iterator(iterator, to, visit)
    }

    fn keys(&self, space: Space, from: &[u8], to: &[u8], reverse: bool, limit: usize) -> io::Result<Vec<Vec<u8>>> {
        range_keys(&self.db, self.family(space)?, None, (from, to), reverse, limit)
    }

    fn view(&self) -> io::Result<Box<dyn DiskView + '_>> {
        Ok(Box::new(RocksView { disk: self, snapshot: self.db.snapshot() }))
    }

    fn checkpoint(&self, dir: &Path) -> io::Result<Box<dyn DiskView>> {
        rocksdb::checkpoint::Checkpoint::new(&self.db)
            .and_then(|checkpoint| checkpoint.create_checkpoint(dir))
            .map_err(to_io_on(format_args!("cannot write a checkpoint in {}", dir.display())))?;
        RocksDisk::open_checkpoint(dir)
    }

    fn open_checkpoint(dir: &Path) -> io::Result<Box<dyn DiskView>> {
        let mut options = Options::default();
        options.set_paranoid_checks(true);
        options.set_max_open_files(CHECKPOINT_TABLE_FILES_OPEN_MAX);
        // As the database was written: its manifest tracks its write-ahead log files. (Opened
        // without these, RocksDB 11.8 crashed replaying a node's checkpoint: the snapshot test of
        // tests/tests/integrity.rs.)
        options.set_wal_recovery_mode(DBRecoveryMode::TolerateCorruptedTailRecords);
        options.set_track_and_verify_wals_in_manifest(true);
        // A checkpoint taken before an upgrade may lack a space added since (`closed_index`,
        // format 12): only the spaces it has are opened, and a read of another fails.
        let found = DB::list_cf(&options, dir)
            .map_err(to_io_on(format_args!("cannot open the checkpoint {}", dir.display())))?;
        let present = families().filter(|family| found.iter().any(|name| name == family.name()));
        let db = DB::open_cf_descriptors_read_only(&options, dir, present, false)
            .map_err(to_io_on(format_args!("cannot open the checkpoint {}", dir.display())))?;
        Ok(Box::new(CheckpointView { db }))
    }

    fn read_mark(&self) -> io::Result<Option<u64>> {
        match std::fs::read(self.path.join(MARK_FILE)) {
            Ok(bytes) => codec::decode(&bytes, "the log mark file"),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    fn write_mark(&self, mark: Option<u64>) -> io::Result<()> {
        let writing = self.path.join(format!("{MARK_FILE}.writing"));
        let mut file = std::fs::File::create(&writing)?;
        file.write_all(&codec::encode(&mark)?)?;
        file.sync_all()?;
        std::fs::rename(&writing, self.path.join(MARK_FILE))?;
        std::fs::File::open(&self.path)?.sync_all()
    }
}

/// A point-in-time view: reads go through one RocksDB snapshot, so they see one consistent state.
struct RocksView<'a> {
    disk: &'a RocksDisk,
    snapshot: rocksdb::Snapshot<'a>,
}

impl DiskView for RocksView<'_> {
    fn scan(&self, space: Space, from: &[u8], to: Option<&[u8]>, visit: Visit<'_>) -> io::Result<()> {
        let mut read_options = ReadOptions::default();
        read_options.set_snapshot(&self.snapshot);
        let family = self.disk.family(space)?;
        let iterator = self.disk.db.iterator_cf_opt(family, read_options, IteratorMode::From(from, Direction::Forward));
        scan_iterator(iterator, to, visit)
    }

    fn get(&self, space: Space, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        self.snapshot.get_cf(self.disk.family(space)?, key).map_err(to_io)
    }

    fn keys(&self, space: Space, from: &[u8], to: &[u8], reverse: bool, limit: usize) -> io::Result<Vec<Vec<u8>>> {
        range_keys(&self.disk.db, self.disk.family(space)?, Some(&self.snapshot), (from, to), reverse, limit)
    }
}

/// A checkpoint, open read-only.
struct CheckpointView {
    db: DB,
}

impl DiskView for CheckpointView {
    fn scan(&self, space: Space, from: &[u8], to: Option<&[u8]>, visit: Visit<'_>) -> io::Result<()> {
        let iterator = self.db.iterator_cf(family(&self.db, space)?, IteratorMode::From(from, Direction::Forward));
        scan_iterator(iterator, to, visit)
    }

    fn get(&self, space: Space, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        self.db.get_cf(family(&self.db, space)?, key).map_err(to_io)
    }

    fn keys(&self, space: Space, from: &[u8], to: &[u8], reverse: bool, limit: usize) -> io::Result<Vec<Vec<u8>>> {
        range_keys(&self.db, family(&self.db, space)?, None, (from, to), reverse, limit)
    }
}
