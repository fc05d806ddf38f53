//! What one request of at most `REQUEST_BYTES_MAX` makes a node allocate on its request path:
//! decoded as the gRPC codec decodes it (`api::decode_budget`), converted, stamped into a log
//! entry, written and read back as the log stores it, and applied to a state machine. The bytes
//! allocated on the path's thread are counted by a global allocator, and their peak must stay
//! within `REQUEST_MEMORY_MULTIPLE_MAX` times `REQUEST_BYTES_MAX`.
//!
//! The requests are the ones that grow most when decoded: every repeated field of submessages or
//! strings filled with the smallest elements the wire allows, each as many as fit in the size
//! limit and as many as fit under the decoding budget, and a full-size import of beads that is
//! applied. The counted figure is the heap blocks glibc's allocator would take for what is asked
//! of it (a `realloc` counts its old and new blocks both, as if it moved them).
#![allow(clippy::unwrap_used)]
// Tests fail loudly on purpose.
// The one `unsafe` block of the test suite: a global allocator that counts, delegating to the
// system's.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use api::command::Proposal;
use api::convert::IntoWrite;
use api::decode_budget::{Schema, decode_budgeted};
use api::limits::{DECODED_REQUEST_BYTES_MAX, REQUEST_BYTES_MAX, REQUEST_MEMORY_MULTIPLE_MAX};
use api::model::{Actor, Timestamp};
use api::proto as pb;
use api::state::State;
use prost::Message;
use raft_store::codec;

/// Counts the heap each thread holds, in blocks as glibc sizes them ([`block`]): now, and the
/// most since [`peak_of`] began.
struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

/// The heap block glibc takes for `size` bytes: an 8-byte header, rounded up to 16, at least 32.
fn block(size: usize) -> usize {
    (size + 8).div_ceil(16).max(2) * 16
}

fn grow(size: usize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + block(size);
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

fn shrink(size: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(block(size))));
}

// SAFETY: every call is passed to `System` unchanged; the counting touches only thread-local
// cells that never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            grow(layout.size());
        }
        pointer
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let pointer = unsafe { System.alloc_zeroed(layout) };
        if !pointer.is_null() {
            grow(layout.size());
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(pointer, layout) };
        shrink(layout.size());
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grow(new_size);
        // SAFETY: the caller's contract, passed on.
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        shrink(if moved.is_null() { new_size } else { layout.size() });
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most bytes live on this thread while `work` ran, over those live when it started.
fn peak_of<T>(work: impl FnOnce() -> T) -> (T, usize) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(start));
    let result = work();
    (result, PEAK.with(Cell::get) - start)
}

/// The bound every request's peak must stay within.
const BOUND: usize = REQUEST_MEMORY_MULTIPLE_MAX * REQUEST_BYTES_MAX;

/// How a request ended on the path.
#[derive(Debug, PartialEq)]
enum Ended {
    /// Refused by the decoding budget, unread.
    OverBudget,
    /// Decoded but refused by conversion or the state machine.
    Refused,
    /// Applied.
    Applied,
}

/// The node's path for one write request of type `R`, on a state that is kept.
fn serve<R: Message + prost::Name + Default + IntoWrite>(state: &mut State, revision: u64, bytes: &[u8]) -> Ended {
    let mut buffer = bytes;
    let request = match decode_budgeted::<R>(&mut buffer) {
        Ok(request) => request,
        Err(status) if status.code() == tonic::Code::ResourceExhausted => return Ended::OverBudget,
        Err(status) => panic!("the bytes are a valid request: {status}"),
    };
    let Ok(write) = request.into_write() else { return Ended::Refused };
    let proposal = Proposal {
        request_id: write.request_id,
        timestamp: Timestamp(1_700_000_000_000),
        default_prefix: "st".into(),
        namespace: write.namespace,
        actor: Actor("memory".into()),
        event_retention: api::limits::EVENT_RETENTION_DEFAULT,
        credential: write.credential,
        command: write.command,
    };
    let entry = codec::encode(&proposal).unwrap();
    drop(proposal);
    let proposal: Proposal = codec::decode(&entry, "proposal").unwrap();
    drop(entry);
    match state.apply(revision, &proposal) {
        Ok(_) => Ended::Applied,
        Err(_) => Ended::Refused,
    }
}

/// One hostile shape: a name, its bytes, the request type that decodes them, and how it ends.
type Shape = (String, Vec<u8>, fn(&mut State, u64, &[u8]) -> Ended, Ended);

/// A family of requests of `count` small elements each, as `bytes(count)` makes them.
struct Family {
    name: &'static str,
    /// The message's full name in the schema.
    message: &'static str,
    /// Wire bytes per element.
    element: usize,
    bytes: fn(usize) -> Vec<u8>,
    serve: fn(&mut State, u64, &[u8]) -> Ended,
}

impl Family {
    /// Two shapes: as many elements as fit in the size limit, and as many as fit under the
    /// decoding budget (found by the codec's own estimate), each with how it ends.
    fn shapes(&self) -> Vec<Shape> {
        let schema = Schema::get();
        let budget = DECODED_REQUEST_BYTES_MAX as u64;
        let fits = |count: usize| schema.estimate(self.message, &(self.bytes)(count), budget).is_ok();
        let mut fill = REQUEST_BYTES_MAX / self.element;
        while (self.bytes)(fill).len() > REQUEST_BYTES_MAX {
            fill -= 1;
        }
        let (mut low, mut high) = (0, fill);
        while low < high {
            let middle = (low + high).div_ceil(2);
            if fits(middle) { low = middle } else { high = middle - 1 }
        }
        let mut shapes = Vec::new();
        for count in if low == fill { vec![fill] } else { vec![fill, low] } {
            let ended = if fits(count) { Ended::Refused } else { Ended::OverBudget };
            let name = format!("{}: {count}", self.name);
            shapes.push((name, (self.bytes)(count), self.serve, ended));
        }
        shapes
    }
}

/// The length-delimited field `number` holding `payload`.
fn field(number: u32, payload: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::new();
    prost::encoding::encode_key(number, prost::encoding::WireType::LengthDelimited, &mut bytes);
    prost::encoding::encode_varint(payload.len() as u64, &mut bytes);
    bytes.extend_from_slice(payload);
    bytes
}

fn families() -> Vec<Family> {
    vec![
        Family {
            name: "import: empty beads",
            message: ".strand.v1.ImportRequest",
            element: 2,
            bytes: |count| [0x12, 0x00].repeat(count),
            serve: serve::<pb::ImportRequest>,
        },
        Family {
            name: "import: beads of one empty metadata entry",
            message: ".strand.v1.ImportRequest",
            element: 4,
            bytes: |count| [0x12, 0x02, 0x6a, 0x00].repeat(count),
            serve: serve::<pb::ImportRequest>,
        },
        Family {
            name: "import: one bead of empty dependencies",
            message: ".strand.v1.ImportRequest",
            element: 3,
            bytes: |count| field(2, &[0xaa, 0x01, 0x00].repeat(count)),
            serve: serve::<pb::ImportRequest>,
        },
        Family {
            name: "import undo: beads of one empty edge",
            message: ".strand.v1.ImportUndoRequest",
            element: 4,
            bytes: |count| [0x12, 0x02, 0x1a, 0x00].repeat(count),
            serve: serve::<pb::ImportUndoRequest>,
        },
        Family {
            name: "txn: empty writes",
            message: ".strand.v1.TxnRequest",
            element: 2,
            bytes: |count| [0x1a, 0x00].repeat(count),
            serve: serve::<pb::TxnRequest>,
        },
        Family {
            name: "close: empty ids",
            message: ".strand.v1.CloseRequest",
            element: 2,
            bytes: |count| [0x12, 0x00].repeat(count),
            serve: serve::<pb::CloseRequest>,
        },
        Family {
            name: "close: one-byte ids",
            message: ".strand.v1.CloseRequest",
            element: 3,
            bytes: |count| [0x12, 0x01, b'a'].repeat(count),
            serve: serve::<pb::CloseRequest>,
        },
        Family {
            // A map keeps one entry per key: distinct 3-byte keys (field 12, key field 1).
            name: "create: distinct empty metadata",
            message: ".strand.v1.CreateRequest",
            element: 7,
            bytes: |count| {
                let mut bytes = field(2, b"t");
                for index in 0..count {
                    let key = [(index & 0x7f) as u8, ((index >> 7) & 0x7f) as u8, ((index >> 14) & 0x7f) as u8];
                    bytes.extend(field(12, &field(1, &key)));
                }
                bytes
            },
            serve: serve::<pb::CreateRequest>,
        },
    ]
}

#[test]
fn a_request_of_the_maximum_size_allocates_a_bounded_multiple_of_it() {
    let mut state = State::new();
    let shapes: Vec<Shape> = families().iter().flat_map(Family::shapes).collect();
    for (revision, (name, bytes, serve, expected)) in shapes.into_iter().enumerate() {
        let size = bytes.len();
        assert!(size <= REQUEST_BYTES_MAX, "{name}: {size} bytes is over the request limit");
        let (ended, peak) = peak_of(|| serve(&mut state, revision as u64 + 1, &bytes));
        eprintln!("{name}: {size} bytes, {ended:?}, peak {peak} bytes ({:.1}x the request limit)", ratio(peak));
        assert!(peak <= BOUND, "{name}: {peak} bytes allocated at the peak, over {BOUND}");
        assert_eq!(ended, expected, "{name}: {size} bytes");
    }
}

#[test]
fn a_full_import_is_applied_within_the_bound() {
    // 1000 beads (the most one import may add) with titles and descriptions filling the size
    // limit, applied to a state machine.
    let description = "d".repeat((REQUEST_BYTES_MAX - 64 * 1024) / api::limits::IMPORT_BEADS_MAX);
    let beads = (0..api::limits::IMPORT_BEADS_MAX)
        .map(|index| pb::Bead {
            id: format!("st-{index}"),
            title: format!("bead {index}"),
            description: description.clone(),
            status: "open".into(),
            ..Default::default()
        })
        .collect();
    let request = pb::ImportRequest { beads, ..Default::default() };
    let bytes = request.encode_to_vec();
    assert!(bytes.len() <= REQUEST_BYTES_MAX, "{} bytes", bytes.len());
    drop(request);
    let mut state = State::new();
    let (ended, peak) = peak_of(|| serve::<pb::ImportRequest>(&mut state, 1, &bytes));
    eprintln!(
        "full import: {} bytes, {ended:?}, peak {peak} bytes ({:.1}x the request limit)",
        bytes.len(),
        ratio(peak)
    );
    assert_eq!(ended, Ended::Applied);
    assert!(peak <= BOUND, "{peak} bytes allocated at the peak, over {BOUND}");
}

fn ratio(bytes: usize) -> f64 {
    bytes as f64 / REQUEST_BYTES_MAX as f64
}
