//! What one request of at most `REQUEST_BYTES_MAX` makes a node allocate on its request path:
//! decoded as the gRPC codec decodes it (`api::decode_budget`), converted, stamped into a log
//! entry, written and read back as the log stores it, and applied to a state machine. The bytes
//! allocated on the path's thread are counted by a global allocator, and their peak must stay
//! within `REQUEST_MEMORY_MULTIPLE_MAX` times `REQUEST_BYTES_MAX`.
//!
//! The requests are the ones that grow most when decoded: every repeated field of submessages or
//! strings filled with the smallest elements the wire allows, each as many as fit in the size
//! limit and as many as fit just under the decoding budget, and a full-size import of beads that
//! is applied. The counted figure is the bytes asked of the allocator (a `realloc` counts its old
//! and new blocks both, as if it moved them).
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

/// Counts the bytes allocated by each thread: now, and the most since the last [`reset_peak`].
struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn grow(bytes: usize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + bytes;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

fn shrink(bytes: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(bytes)));
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

/// `count` copies of the field `key` (its tag bytes) with the payload `element`, after `prefix`.
fn repeated(prefix: &[u8], key: &[u8], element: &[u8], count: usize) -> Vec<u8> {
    let mut bytes = prefix.to_vec();
    for _ in 0..count {
        bytes.extend_from_slice(key);
        bytes.extend_from_slice(element);
    }
    bytes
}

/// The length-delimited field `number` holding `payload`.
fn field(number: u32, payload: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::new();
    prost::encoding::encode_key(number, prost::encoding::WireType::LengthDelimited, &mut bytes);
    prost::encoding::encode_varint(payload.len() as u64, &mut bytes);
    bytes.extend_from_slice(payload);
    bytes
}

/// How many elements of `cost` bytes each fit just under the decoding budget beside `holder`
/// bytes of the message holding them, at most `fill` (as many as fit in the size limit).
fn under_budget(cost: u64, holder: u64, fill: usize) -> usize {
    (((DECODED_REQUEST_BYTES_MAX as u64 - holder) / cost) as usize - 1).min(fill)
}

fn size_of(message: &str) -> u64 {
    Schema::get().message(&format!(".strand.v1.{message}")).unwrap().size
}

/// One hostile shape: a name, its bytes, the request type that decodes them, and how it ends.
type Shape = (&'static str, Vec<u8>, fn(&mut State, u64, &[u8]) -> Ended, Ended);

/// How a shape of `count` elements ends: refused unread when `count` is over what fits under
/// the budget, else decoded and refused.
fn expected(count: usize, under_budget: usize) -> Ended {
    if count > under_budget { Ended::OverBudget } else { Ended::Refused }
}

fn shapes() -> Vec<Shape> {
    let fill = |overhead: usize, element: usize| (REQUEST_BYTES_MAX - overhead) / element;
    let bead = size_of("Bead");
    let mut shapes: Vec<Shape> = Vec::new();
    let most = under_budget(bead, 0, fill(0, 2));
    for count in [fill(0, 2), most] {
        let bytes = repeated(&[], &[0x12], &[0x00], count);
        shapes.push(("import: empty beads", bytes, serve::<pb::ImportRequest>, expected(count, most)));
    }
    let write = size_of("TxnWrite");
    let most = under_budget(write, 0, fill(0, 2));
    for count in [fill(0, 2), most] {
        let bytes = repeated(&[], &[0x1a], &[0x00], count);
        shapes.push(("txn: empty writes", bytes, serve::<pb::TxnRequest>, expected(count, most)));
    }
    let dependency = size_of("Dependency");
    let most = under_budget(dependency, bead, fill(8, 3));
    for count in [fill(8, 3), most] {
        // One bead (field 2) holding `count` empty dependencies (field 21).
        let bytes = field(2, &repeated(&[], &[0xaa, 0x01], &[0x00], count));
        let name = "import: one bead of empty dependencies";
        shapes.push((name, bytes, serve::<pb::ImportRequest>, expected(count, most)));
    }
    // Empty ids: as many as fit in the size limit fit under the budget too.
    let most = under_budget(24, 0, fill(0, 2));
    let bytes = repeated(&[], &[0x12], &[0x00], most);
    shapes.push(("close: empty ids", bytes, serve::<pb::CloseRequest>, expected(most, most)));
    // Distinct metadata keys (a map keeps one entry per key): field 12, entries of a 3-byte key.
    let entry = 2 * size_of("CreateRequest.MetadataEntry");
    let most = under_budget(entry, 1, fill(16, 7));
    let mut bytes = field(2, b"t");
    for index in 0..most {
        let key = [(index & 0x7f) as u8, ((index >> 7) & 0x7f) as u8, ((index >> 14) & 0x7f) as u8];
        bytes.extend(field(12, &field(1, &key)));
    }
    shapes.push(("create: distinct empty metadata", bytes, serve::<pb::CreateRequest>, expected(most, most)));
    shapes
}

#[test]
fn a_request_of_the_maximum_size_allocates_a_bounded_multiple_of_it() {
    let mut state = State::new();
    for (revision, (name, bytes, serve, expected)) in shapes().into_iter().enumerate() {
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
