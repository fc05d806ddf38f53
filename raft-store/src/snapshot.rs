//! Snapshot files: the state machine's records at one applied log id, written and read as a
//! stream so that neither building, sending nor installing a snapshot holds it whole in memory.
//!
//! Format: the magic line, the length-prefixed snapshot metadata, then length-prefixed key/value
//! records of the state space, then an end marker with the record count and a CRC-32 of every
//! byte before it. A file cut short, with a wrong count, a wrong checksum, or a record value whose
//! own checksum fails (every stored value carries one, see [`crate::codec`]) is refused; a
//! snapshot received from another node is read through once this way ([`verify`]) before
//! anything is replaced.
//!
//! A snapshot this node built is a checkpoint of its disk ([`crate::disk::Disk::checkpoint`]), not
//! a file: [`SnapshotFile::readable`] writes it out in this format only when it is read (sent to a
//! follower, or saved as a backup), into a file that is unlinked as soon as it is open.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::codec;
use crate::disk::{DiskView, Space};
use crate::types::SnapshotMeta;

const MAGIC: &[u8] = b"STRAND-SNAPSHOT-2\n";
/// Stands where a record's length would, after the last record; so a key or value is shorter.
const END_MARKER: u32 = u32::MAX;
/// Most bytes reserved for a frame before any of it is read: a frame up to this size is read
/// into one allocation, a larger one grows as it arrives.
const FRAME_RESERVE_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Opens a checkpoint of a disk of one kind (`Disk::open_checkpoint`).
pub type OpenCheckpoint = fn(&Path) -> io::Result<Box<dyn DiskView>>;

/// A snapshot's data: a snapshot file (received from another node, or restored), kept open so that
/// a snapshot replaced on disk while it is being sent stays readable; or a checkpoint this node
/// built, read as a snapshot file once [`SnapshotFile::readable`] writes it out.
#[derive(Debug)]
pub struct SnapshotFile {
    /// Where it is (or was) on disk: the file, or the checkpoint's directory.
    pub path: PathBuf,
    source: Source,
}

#[derive(Debug)]
enum Source {
    File(File),
    Checkpoint {
        /// The snapshot's metadata, read from the checkpoint when it was built.
        meta: SnapshotMeta,
        /// Opens the checkpoint's disk (`path`/[`CHECKPOINT_DISK`]).
        open: OpenCheckpoint,
        /// Whether the disk does real I/O: then it is written out on tokio's blocking pool.
        blocks: bool,
    },
}

/// The directory of a checkpoint's disk, inside the checkpoint's directory.
pub const CHECKPOINT_DISK: &str = "db";

impl SnapshotFile {
    /// Opens a snapshot file for reading.
    pub fn open(path: &Path) -> io::Result<SnapshotFile> {
        Ok(SnapshotFile { path: path.to_path_buf(), source: Source::File(File::open(path)?) })
    }

    /// A snapshot file already open, at its start.
    pub(crate) fn from_open(path: PathBuf, file: File) -> SnapshotFile {
        SnapshotFile { path, source: Source::File(file) }
    }

    /// A checkpoint in the directory `path`, holding the state at `meta`.
    pub(crate) fn checkpoint(path: &Path, meta: SnapshotMeta, open: OpenCheckpoint, blocks: bool) -> SnapshotFile {
        SnapshotFile { path: path.to_path_buf(), source: Source::Checkpoint { meta, open, blocks } }
    }

    /// Whether it is a checkpoint (not yet a file).
    pub fn is_checkpoint(&self) -> bool {
        matches!(self.source, Source::Checkpoint { .. })
    }

    /// The snapshot as a file in this module's format, open at its start. A checkpoint is written
    /// out first (its cost grows with the state: only a follower's catch-up and a backup pay it),
    /// beside the checkpoint, into a file unlinked once it is open.
    pub fn into_file(self) -> io::Result<File> {
        match self.source {
            Source::File(mut file) => {
                std::io::Seek::seek(&mut file, io::SeekFrom::Start(0))?;
                Ok(file)
            }
            Source::Checkpoint { meta, open, .. } => write_out(&self.path, &meta, open),
        }
    }

    /// [`SnapshotFile::into_file`], on tokio's blocking pool when that writes out a checkpoint
    /// of a disk that does real I/O.
    pub async fn readable(self) -> io::Result<File> {
        if !matches!(self.source, Source::Checkpoint { blocks: true, .. }) {
            return self.into_file();
        }
        tokio::task::spawn_blocking(move || self.into_file())
            .await
            .map_err(|error| io::Error::other(format!("writing out a snapshot did not finish: {error}")))?
    }
}

/// Writes the checkpoint in `dir` out as a snapshot file, in `dir`'s parent, and opens it.
fn write_out(dir: &Path, meta: &SnapshotMeta, open: OpenCheckpoint) -> io::Result<File> {
    static WRITTEN_OUT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let view = open(&dir.join(CHECKPOINT_DISK))?;
    let number = WRITTEN_OUT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("{SENDING_PREFIX}{}-{number}.snapshot", std::process::id());
    let path = dir.parent().unwrap_or(dir).join(name);
    let written = write_view(&path, meta, view.as_ref()).and_then(|()| File::open(&path));
    let _ = std::fs::remove_file(&path);
    written
}

/// The name of every file a checkpoint is written out to starts with this: any left by a crash is
/// deleted at start.
pub const SENDING_PREFIX: &str = "sending-";

/// Writes the state space of `view` as a snapshot file at `path`, with `meta`.
fn write_view(path: &Path, meta: &SnapshotMeta, view: &dyn DiskView) -> io::Result<()> {
    let mut writer = SnapshotWriter::create(path, meta)?;
    view.scan(Space::State, &[], None, &mut |key, value| writer.record(key, value).map(|()| true))?;
    writer.finish()
}

/// A writer that keeps the CRC-32 of everything written through it.
struct Summing<W> {
    inner: W,
    hasher: crc32fast::Hasher,
}

impl<W: Write> Write for Summing<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let written = self.inner.write(bytes)?;
        self.hasher.update(&bytes[..written]);
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A reader that keeps the CRC-32 of everything read through it.
struct Verifying<R> {
    inner: R,
    hasher: crc32fast::Hasher,
}

impl<R: Read> Read for Verifying<R> {
    fn read(&mut self, bytes: &mut [u8]) -> io::Result<usize> {
        let read = self.inner.read(bytes)?;
        self.hasher.update(&bytes[..read]);
        Ok(read)
    }
}

/// Writes a snapshot file record by record.
pub struct SnapshotWriter {
    out: Summing<BufWriter<File>>,
    count: u64,
}

fn write_frame(out: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    let length = u32::try_from(bytes.len()).ok().filter(|length| *length != END_MARKER).ok_or_else(|| {
        io::Error::other(format!("a state record of {} bytes is over the snapshot format's 4 GiB limit", bytes.len()))
    })?;
    out.write_all(&length.to_be_bytes())?;
    out.write_all(bytes)
}

impl SnapshotWriter {
    /// Starts a snapshot file at `path` with its metadata.
    pub fn create(path: &Path, meta: &SnapshotMeta) -> io::Result<SnapshotWriter> {
        let mut out = Summing { inner: BufWriter::new(File::create(path)?), hasher: crc32fast::Hasher::new() };
        out.write_all(MAGIC)?;
        write_frame(&mut out, &codec::encode(meta)?)?;
        Ok(SnapshotWriter { out, count: 0 })
    }

    /// Adds one state record.
    pub fn record(&mut self, key: &[u8], value: &[u8]) -> io::Result<()> {
        write_frame(&mut self.out, key)?;
        write_frame(&mut self.out, value)?;
        self.count += 1;
        Ok(())
    }

    /// Ends the file with its count and checksum, and syncs it to disk.
    pub fn finish(mut self) -> io::Result<()> {
        self.out.write_all(&END_MARKER.to_be_bytes())?;
        self.out.write_all(&self.count.to_be_bytes())?;
        let Summing { inner, hasher } = self.out;
        let mut out = inner;
        out.write_all(&hasher.finalize().to_be_bytes())?;
        let file = out.into_inner().map_err(|error| error.into_error())?;
        file.sync_all()
    }
}

/// Reads a snapshot file record by record.
pub struct SnapshotReader {
    input: Verifying<BufReader<File>>,
    count: u64,
    /// The metadata from the file's header.
    pub meta: SnapshotMeta,
}

fn corrupt(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

fn read_u32(input: &mut impl Read) -> io::Result<u32> {
    let mut bytes = [0u8; 4];
    input.read_exact(&mut bytes)?;
    Ok(u32::from_be_bytes(bytes))
}

/// Reads a frame of `length` bytes. Memory grows with the bytes actually read, so a damaged length
/// in a short file fails as cut short instead of allocating up to 4 GiB first; and every record
/// the writer accepts, however large, reads back.
fn read_bytes(input: &mut impl Read, length: u32) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity((length as usize).min(FRAME_RESERVE_BYTES_MAX));
    input.by_ref().take(u64::from(length)).read_to_end(&mut bytes)?;
    if bytes.len() != length as usize {
        return Err(corrupt(format!("snapshot file is cut short inside a frame of {length} bytes")));
    }
    Ok(bytes)
}

impl SnapshotReader {
    /// Opens a snapshot file from its start and reads its header.
    pub fn new(file: File) -> io::Result<SnapshotReader> {
        SnapshotReader::at(file, 0)
    }

    /// Reads a snapshot that starts `offset` bytes into `file` and runs to its end (a backup
    /// file's, after its header).
    pub fn at(mut file: File, offset: u64) -> io::Result<SnapshotReader> {
        use std::io::Seek;
        file.seek(io::SeekFrom::Start(offset))?;
        let mut input = Verifying { inner: BufReader::new(file), hasher: crc32fast::Hasher::new() };
        let mut magic = vec![0u8; MAGIC.len()];
        input.read_exact(&mut magic).map_err(|_| corrupt("snapshot file is too short".into()))?;
        if magic != MAGIC {
            return Err(corrupt("not a Strand snapshot file".into()));
        }
        let length = read_u32(&mut input)?;
        let meta = codec::decode(&read_bytes(&mut input, length)?, "snapshot metadata")?;
        Ok(SnapshotReader { input, count: 0, meta })
    }

    /// The next record, or `None` at the (verified) end.
    pub fn next_record(&mut self) -> io::Result<Option<(Vec<u8>, Vec<u8>)>> {
        let length = read_u32(&mut self.input).map_err(|_| corrupt("snapshot file is cut short".into()))?;
        if length == END_MARKER {
            let mut count = [0u8; 8];
            self.input
                .read_exact(&mut count)
                .map_err(|_| corrupt("snapshot file is cut short in its trailer".into()))?;
            let expected = u64::from_be_bytes(count);
            if expected != self.count {
                return Err(corrupt(format!("snapshot holds {} records, its trailer says {expected}", self.count)));
            }
            let computed = self.input.hasher.clone().finalize();
            let mut stored = [0u8; 4];
            self.input.inner.read_exact(&mut stored).map_err(|_| corrupt("snapshot file has no checksum".into()))?;
            let stored = u32::from_be_bytes(stored);
            if stored != computed {
                return Err(corrupt(format!(
                    "snapshot file fails its checksum (stored {stored:08x}, computed {computed:08x})"
                )));
            }
            let mut rest = [0u8; 1];
            if self.input.inner.read(&mut rest)? != 0 {
                return Err(corrupt("snapshot file has bytes after its checksum".into()));
            }
            return Ok(None);
        }
        let key = read_bytes(&mut self.input, length)?;
        let value_length = read_u32(&mut self.input)?;
        let value = read_bytes(&mut self.input, value_length)?;
        self.count += 1;
        Ok(Some((key, value)))
    }
}

/// Reads a whole snapshot file and checks its framing, record count, whole-file checksum and every
/// record value's own checksum; answers its metadata. A node runs this on a snapshot received from
/// the network before handing it to Raft.
pub fn verify(path: &Path) -> io::Result<SnapshotMeta> {
    let mut reader = SnapshotReader::new(File::open(path)?)?;
    let mut position = 0u64;
    while let Some((_, value)) = reader.next_record()? {
        position += 1;
        codec::unseal(&value, &format!("snapshot record {position}"))?;
    }
    Ok(reader.meta)
}
