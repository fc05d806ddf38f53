//! The gRPC codec of every Strand service ([`BudgetCodec`]): prost's encoding, with a budget on
//! what decoding a request may allocate.
//!
//! A protobuf message can grow many times its size when decoded: a repeated field of empty
//! submessages costs two bytes on the wire per element, and a whole Rust struct (hundreds of
//! bytes for a `Bead`) in memory. Unchecked, one request of [`REQUEST_BYTES_MAX`] could make a
//! node allocate hundreds of times its size before any limit of [`crate::limits`] is checked.
//!
//! So before a request message (the input of any method of `proto/strand.proto`) is decoded, its
//! wire bytes are walked once against the schema, without allocating, and the memory its decoded
//! form holds is estimated: every element of a repeated or map field costs the in-memory size of
//! its type (bounded from the schema, [`MessageShape::size`]), a collection's first element the
//! room it takes for several, every string and byte field the heap block that holds it. A
//! request whose estimate passes [`DECODED_REQUEST_BYTES_MAX`] is refused with
//! RESOURCE_EXHAUSTED, unread. Responses are decoded as prost decodes them: a client trusts the
//! node it asked. Which messages are requests is generated at build time ([`REQUEST_TYPES`]), so
//! a client decoding an answer never decodes the schema (a one-shot CLI command would spend more
//! time on that than on its request).
//!
//! The estimate does not count the spare room of a growing collection (a `Vec` or map at most
//! doubles its room, and holds the old room while it moves), so decoding may allocate a small
//! multiple of it; `tests/tests/request_memory.rs` measures what the shapes that grow most
//! allocate against [`crate::limits::REQUEST_MEMORY_MULTIPLE_MAX`].

use std::collections::{HashMap, HashSet};
use std::marker::PhantomData;
use std::sync::OnceLock;

use prost::bytes::Buf;
use prost::encoding::decode_varint;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FileDescriptorSet};
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

use crate::limits::{DECODED_REQUEST_BYTES_MAX, REQUEST_BYTES_MAX};

/// The compiled schema of `proto/strand.proto`, written by the build script.
pub(crate) const DESCRIPTOR: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/strand_descriptor.bin"));

/// Bytes a `String`, `Vec` or `Option` of either takes in its parent, besides its contents.
const COLLECTION_BYTES: u64 = 24;
/// Bytes a `HashMap` takes in its parent, besides its entries.
const MAP_BYTES: u64 = 48;
/// Bytes any scalar field takes in its parent, `Option` and padding included.
const SCALAR_BYTES: u64 = 16;
/// A map entry's cost over its key and value: a hash table holds about twice the room of its
/// entries after it grows.
const MAP_ENTRY_FACTOR: u64 = 2;
/// Elements a `Vec` takes room for at its first push (Rust's minimum for elements of 2 to 1024
/// bytes; larger ones get room for one, smaller ones for 8, of at most 8 bytes in all), and the
/// slots of a hash map's first table.
const FIRST_ROOM: u64 = 4;
/// The smallest heap block glibc hands out, and room for a hash map's control bytes.
const BLOCK_MIN: u64 = 32;
/// Deepest nesting the walk follows; prost refuses deeper messages too.
const DEPTH_MAX: u32 = 100;

/// How one field of a message is stored once decoded.
#[derive(Clone, Debug)]
enum FieldKind {
    /// A submessage, by its full name (`.strand.v1.Bead`).
    Message(String),
    /// A string or byte field.
    Text,
    /// A number, boolean or enum.
    Scalar,
}

/// One field of a message, as the walk needs it.
#[derive(Clone, Debug)]
struct FieldShape {
    kind: FieldKind,
    repeated: bool,
}

/// One message of the schema, as the walk needs it.
#[derive(Clone, Debug, Default)]
pub struct MessageShape {
    /// An upper bound of the size of the message's Rust struct, submessages held inline
    /// included (a map entry's: its key and value).
    pub size: u64,
    /// Whether this is the entry type of a map field.
    map_entry: bool,
    fields: HashMap<u32, FieldShape>,
}

/// The schema's messages; which of them are requests is known at build time ([`REQUEST_TYPES`]).
#[derive(Debug, Default)]
pub struct Schema {
    messages: HashMap<String, MessageShape>,
}

include!(concat!(env!("OUT_DIR"), "/request_types.rs"));

/// Why a request was refused before decoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverBudget {
    /// The estimate when the walk stopped (it stops as soon as it passes the budget).
    pub estimate: u64,
}

impl Schema {
    /// The schema of `proto/strand.proto`.
    pub fn get() -> &'static Schema {
        static SCHEMA: OnceLock<Schema> = OnceLock::new();
        SCHEMA.get_or_init(|| {
            let set: FileDescriptorSet =
                prost::Message::decode(DESCRIPTOR).expect("the build script writes a valid descriptor set");
            Schema::from_descriptors(&set)
        })
    }

    fn from_descriptors(set: &FileDescriptorSet) -> Schema {
        let mut descriptors = HashMap::new();
        for file in &set.file {
            let package = file.package();
            for message in &file.message_type {
                collect(&mut descriptors, &format!(".{package}"), message);
            }
        }
        let mut schema = Schema::default();
        let mut sizes = HashMap::new();
        for (name, descriptor) in &descriptors {
            let size = size_of_message(&descriptors, &mut sizes, &mut HashSet::new(), name);
            let fields = descriptor
                .field
                .iter()
                .map(|field| {
                    let kind = match field.r#type() {
                        Type::Message | Type::Group => FieldKind::Message(field.type_name().to_owned()),
                        Type::String | Type::Bytes => FieldKind::Text,
                        _ => FieldKind::Scalar,
                    };
                    let repeated = field.label() == Label::Repeated;
                    (field.number() as u32, FieldShape { kind, repeated })
                })
                .collect();
            schema.messages.insert(name.clone(), MessageShape { size, map_entry: is_map_entry(descriptor), fields });
        }
        schema
    }

    /// The shape of the message named `full_name` (`.strand.v1.Bead`).
    pub fn message(&self, full_name: &str) -> Option<&MessageShape> {
        self.messages.get(full_name)
    }

    /// Whether `full_name` is the input of a method, so decoding it is budgeted.
    pub fn is_request(full_name: &str) -> bool {
        REQUEST_TYPES.binary_search(&full_name).is_ok()
    }

    /// The estimated bytes decoding `bytes` as the message `full_name` allocates, or
    /// [`OverBudget`] as soon as it passes `budget`. Malformed bytes end the walk with the
    /// estimate so far: prost refuses them in turn.
    pub fn estimate(&self, full_name: &str, bytes: &[u8], budget: u64) -> Result<u64, OverBudget> {
        let Some(shape) = self.message(full_name) else { return Ok(0) };
        let mut walk = Walk { schema: self, estimate: shape.size, budget };
        match walk.message(shape, bytes, 0) {
            Ok(()) | Err(Stop::Malformed) => Ok(walk.estimate),
            Err(Stop::Over) => Err(OverBudget { estimate: walk.estimate }),
        }
    }
}

/// Whether `message` is the entry type of a map field.
fn is_map_entry(message: &DescriptorProto) -> bool {
    message.options.as_ref().is_some_and(|options| options.map_entry())
}

/// Gathers every message of `message`'s tree under its full name.
fn collect<'a>(into: &mut HashMap<String, &'a DescriptorProto>, scope: &str, message: &'a DescriptorProto) {
    let name = format!("{scope}.{}", message.name());
    for nested in &message.nested_type {
        collect(into, &name, nested);
    }
    into.insert(name, message);
}

/// An upper bound of the in-memory size of message `name`: every field's room in the struct,
/// a singular submessage's own size (prost holds it inline, except in a cycle, where it is
/// boxed). Oneof members are all counted, which bounds the enum that holds one of them.
fn size_of_message(
    descriptors: &HashMap<String, &DescriptorProto>,
    sizes: &mut HashMap<String, u64>,
    visiting: &mut HashSet<String>,
    name: &str,
) -> u64 {
    if let Some(size) = sizes.get(name) {
        return *size;
    }
    let Some(descriptor) = descriptors.get(name) else { return COLLECTION_BYTES };
    if !visiting.insert(name.to_owned()) {
        return COLLECTION_BYTES; // a cycle: prost boxes the field
    }
    let mut size = 0;
    for field in &descriptor.field {
        let repeated = field.label() == Label::Repeated;
        size += match field.r#type() {
            Type::Message | Type::Group if repeated => {
                let map = descriptors.get(field.type_name()).is_some_and(|entry| is_map_entry(entry));
                if map { MAP_BYTES } else { COLLECTION_BYTES }
            }
            Type::Message | Type::Group => size_of_message(descriptors, sizes, visiting, field.type_name()) + 8,
            Type::String | Type::Bytes => COLLECTION_BYTES,
            _ if repeated => COLLECTION_BYTES,
            _ => SCALAR_BYTES,
        };
    }
    visiting.remove(name);
    let size = size.max(8);
    sizes.insert(name.to_owned(), size);
    size
}

/// Why a walk stopped early.
enum Stop {
    Over,
    Malformed,
}

struct Walk<'s> {
    schema: &'s Schema,
    estimate: u64,
    budget: u64,
}

impl Walk<'_> {
    fn add(&mut self, bytes: u64) -> Result<(), Stop> {
        self.estimate = self.estimate.saturating_add(bytes);
        if self.estimate > self.budget { Err(Stop::Over) } else { Ok(()) }
    }

    fn message(&mut self, shape: &MessageShape, mut bytes: &[u8], depth: u32) -> Result<(), Stop> {
        if depth > DEPTH_MAX {
            return Err(Stop::Malformed);
        }
        // The repeated fields (numbered below 64) that already hold an element.
        let mut seen = 0u64;
        while bytes.has_remaining() {
            let key = decode_varint(&mut bytes).map_err(|_| Stop::Malformed)?;
            let (number, wire_type) = ((key >> 3) as u32, key & 7);
            let payload = match wire_type {
                0 => {
                    decode_varint(&mut bytes).map_err(|_| Stop::Malformed)?;
                    None
                }
                1 | 5 => {
                    let width = if wire_type == 1 { 8 } else { 4 };
                    take(&mut bytes, width)?;
                    None
                }
                2 => {
                    let len = decode_varint(&mut bytes).map_err(|_| Stop::Malformed)?;
                    Some(take(&mut bytes, usize::try_from(len).map_err(|_| Stop::Malformed)?)?)
                }
                3 => {
                    skip_group(&mut bytes, number, depth + 1)?;
                    None
                }
                _ => return Err(Stop::Malformed),
            };
            let Some(field) = shape.fields.get(&number) else { continue };
            // A collection's first element makes it take room for several.
            let first = field.repeated && first_element(&mut seen, number);
            match (&field.kind, payload) {
                (FieldKind::Message(name), Some(payload)) => {
                    let Some(inner) = self.schema.message(name) else { continue };
                    if field.repeated {
                        let factor = if inner.map_entry { MAP_ENTRY_FACTOR } else { 1 };
                        self.add(element(inner.size * factor, first))?;
                    }
                    self.message(inner, payload, depth + 1)?;
                }
                (FieldKind::Text, Some(payload)) => {
                    let header = if field.repeated { element(COLLECTION_BYTES, first) } else { 0 };
                    self.add(header + block(payload.len() as u64))?;
                }
                // Packed numbers: at most one per byte, each in at most 8 bytes.
                (FieldKind::Scalar, Some(payload)) => self.add(element(8, first) + 8 * payload.len() as u64)?,
                (FieldKind::Scalar, None) if field.repeated => self.add(element(8, first))?,
                _ => {}
            }
        }
        Ok(())
    }
}

/// Whether field `number` gets its first element now (a field numbered 64 or more always counts
/// as getting its first, which only raises the estimate).
fn first_element(seen: &mut u64, number: u32) -> bool {
    if number >= 64 {
        return true;
    }
    let bit = 1u64 << number;
    let first = *seen & bit == 0;
    *seen |= bit;
    first
}

/// What one element of `size` bytes costs a collection: the first makes a `Vec` take room for
/// [`FIRST_ROOM`] (a hash map as many slots and its control bytes).
fn element(size: u64, first: bool) -> u64 {
    if first { FIRST_ROOM * size + BLOCK_MIN } else { size }
}

/// The heap block holding `len` bytes, as glibc's allocator sizes it: a header of 8 bytes,
/// rounded up to 16, and never under [`BLOCK_MIN`]; nothing for an empty string.
fn block(len: u64) -> u64 {
    if len == 0 { 0 } else { ((len + 8).div_ceil(16) * 16).max(BLOCK_MIN) }
}

/// Takes the next `len` bytes off `bytes`.
fn take<'b>(bytes: &mut &'b [u8], len: usize) -> Result<&'b [u8], Stop> {
    if len > bytes.len() {
        return Err(Stop::Malformed);
    }
    let (taken, rest) = bytes.split_at(len);
    *bytes = rest;
    Ok(taken)
}

/// Skips a group (a proto2 form prost skips without keeping) up to its end tag.
fn skip_group(bytes: &mut &[u8], number: u32, depth: u32) -> Result<(), Stop> {
    if depth > DEPTH_MAX {
        return Err(Stop::Malformed);
    }
    loop {
        let key = decode_varint(bytes).map_err(|_| Stop::Malformed)?;
        let (inner, wire_type) = ((key >> 3) as u32, key & 7);
        match wire_type {
            0 => {
                decode_varint(bytes).map_err(|_| Stop::Malformed)?;
            }
            1 | 5 => {
                take(bytes, if wire_type == 1 { 8 } else { 4 })?;
            }
            2 => {
                let len = decode_varint(bytes).map_err(|_| Stop::Malformed)?;
                take(bytes, usize::try_from(len).map_err(|_| Stop::Malformed)?)?;
            }
            3 => skip_group(bytes, inner, depth + 1)?,
            4 if inner == number => return Ok(()),
            _ => return Err(Stop::Malformed),
        }
    }
}

/// The budget check of one request message: `Ok` when `bytes` may be decoded as `full_name`.
pub fn check(full_name: &str, bytes: &[u8]) -> Result<(), Status> {
    // Before the schema: a client decoding an answer never loads it.
    if !Schema::is_request(full_name) {
        return Ok(());
    }
    let schema = Schema::get();
    let budget = DECODED_REQUEST_BYTES_MAX as u64;
    schema.estimate(full_name, bytes, budget).map(drop).map_err(|over| {
        Status::resource_exhausted(format!(
            "the request ({} bytes) would take more than {} MiB of memory to decode (over {} bytes before the estimate stopped): it holds too many small items; send them in several requests",
            bytes.len(),
            DECODED_REQUEST_BYTES_MAX / (1024 * 1024),
            over.estimate,
        ))
    })
}

/// prost's codec for the messages of `proto/strand.proto`, budgeting the decoding of requests
/// (see the module header). The generated services and clients use it (`build.rs`).
#[derive(Debug, Clone)]
pub struct BudgetCodec<T, U> {
    _types: PhantomData<(T, U)>,
}

impl<T, U> Default for BudgetCodec<T, U> {
    fn default() -> Self {
        BudgetCodec { _types: PhantomData }
    }
}

impl<T, U> Codec for BudgetCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + prost::Name + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = BudgetEncoder<T>;
    type Decoder = BudgetDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        BudgetEncoder { _type: PhantomData }
    }

    fn decoder(&mut self) -> Self::Decoder {
        BudgetDecoder { _type: PhantomData }
    }
}

/// Encodes `T` as prost does.
#[derive(Debug)]
pub struct BudgetEncoder<T> {
    _type: PhantomData<T>,
}

impl<T: prost::Message> Encoder for BudgetEncoder<T> {
    type Item = T;
    type Error = Status;

    fn encode(&mut self, item: T, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(buf).map_err(|error| Status::internal(format!("encoding a message: {error}")))
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::default()
    }
}

/// Decodes `U`, a request only within [`DECODED_REQUEST_BYTES_MAX`].
#[derive(Debug)]
pub struct BudgetDecoder<U> {
    _type: PhantomData<U>,
}

impl<U: prost::Message + prost::Name + Default> Decoder for BudgetDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        decode_budgeted(buf).map(Some)
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::default()
    }
}

/// Decodes one message of type `U` from `buf`, checking a request's budget first.
pub fn decode_budgeted<U: prost::Message + prost::Name + Default>(buf: &mut impl Buf) -> Result<U, Status> {
    let len = buf.remaining();
    if buf.chunk().len() == len {
        if let Err(refused) = check(&format!(".{}", U::full_name()), buf.chunk()) {
            buf.advance(len); // the message is consumed, refused
            return Err(refused);
        }
    } else {
        // Not contiguous (never so for tonic's buffers): gather it once to walk it.
        let bytes = buf.copy_to_bytes(len);
        check(&format!(".{}", U::full_name()), &bytes)?;
        return U::decode(bytes).map_err(decode_error);
    }
    U::decode(buf).map_err(decode_error)
}

fn decode_error(error: prost::DecodeError) -> Status {
    Status::internal(format!("the message could not be decoded ({error}); is the client of the same protocol version?"))
}

const _: () = assert!(REQUEST_BYTES_MAX <= DECODED_REQUEST_BYTES_MAX);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto as pb;

    #[test]
    fn every_request_type_and_repeated_element_is_no_larger_than_its_schema_bound() {
        let schema = Schema::get();
        macro_rules! bounded {
            ($($type:ident),* $(,)?) => {$(
                let shape = schema.message(&format!(".strand.v1.{}", stringify!($type))).expect(stringify!($type));
                let size = std::mem::size_of::<pb::$type>() as u64;
                assert!(size <= shape.size, "{}: {} bytes over a bound of {}", stringify!($type), size, shape.size);
            )*};
        }
        bounded!(
            Bead,
            Dependency,
            Lease,
            CreateRequest,
            UpdateRequest,
            MetadataChange,
            SetMetadataRequest,
            ClaimRequest,
            ClaimNextRequest,
            ReadyFilter,
            ListRequest,
            CloseRequest,
            GetRequest,
            TxnRequest,
            TxnWrite,
            TxnCondition,
            TxnFence,
            ImportRequest,
            ImportedBead,
            ImportUndoRequest,
            CookRequest,
            SlingRequest,
            MailSendRequest,
            ConvoyCreateRequest,
            OrderPutRequest,
            FormulaPutRequest,
            EventsRequest,
            WatchRequest,
            TokenSpec,
            TokenCreateRequest,
            AuthEnableRequest,
            RaftPayload,
            SnapshotChunk,
            WriteHeader,
            ReadHeader,
        );
    }

    #[test]
    fn requests_are_the_inputs_of_methods() {
        assert!(Schema::is_request(".strand.v1.ImportRequest"));
        assert!(Schema::is_request(".strand.v1.RaftPayload"));
        assert!(!Schema::is_request(".strand.v1.BeadsResponse"));
    }

    #[test]
    fn empty_submessages_are_counted_at_their_size_and_an_import_of_them_is_refused() {
        let schema = Schema::get();
        let bead = schema.message(".strand.v1.Bead").unwrap().size;
        // Field 2 (beads) of ImportRequest, 1000 empty beads.
        let bytes: Vec<u8> = std::iter::repeat_n([0x12, 0x00], 1000).flatten().collect();
        let import = schema.message(".strand.v1.ImportRequest").unwrap().size;
        // The first bead makes the list take room for four.
        let expected = import + (FIRST_ROOM * bead + BLOCK_MIN) + 999 * bead;
        assert_eq!(schema.estimate(".strand.v1.ImportRequest", &bytes, u64::MAX), Ok(expected));
        let bytes: Vec<u8> = std::iter::repeat_n([0x12, 0x00], REQUEST_BYTES_MAX / 2).flatten().collect();
        let status = check(".strand.v1.ImportRequest", &bytes).unwrap_err();
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert!(status.message().contains("send them in several requests"), "{}", status.message());
        // A response is never budgeted.
        assert!(check(".strand.v1.BeadsResponse", &bytes).is_ok());
    }

    #[test]
    fn strings_count_their_heap_block_and_unknown_or_malformed_bytes_stop_nothing() {
        let schema = Schema::get();
        // GetRequest: ids (2) "x", "yz"; an unknown field 99 (varint 5); an empty header (1).
        let bytes = [0x12, 1, b'x', 0x12, 2, b'y', b'z', 0x98, 0x06, 5, 0x0a, 0];
        let get = schema.message(".strand.v1.GetRequest").unwrap().size;
        let first = FIRST_ROOM * COLLECTION_BYTES + BLOCK_MIN + BLOCK_MIN;
        let second = COLLECTION_BYTES + BLOCK_MIN;
        assert_eq!(schema.estimate(".strand.v1.GetRequest", &bytes, u64::MAX), Ok(get + first + second));
        // A length past the end: the estimate so far, and prost refuses the bytes.
        assert_eq!(schema.estimate(".strand.v1.GetRequest", &[0x0a, 9, b'a'], u64::MAX), Ok(get));
        let mut bytes: &[u8] = &[0x0a, 9, b'a'];
        let error = decode_budgeted::<pb::GetRequest>(&mut bytes).unwrap_err();
        assert_eq!(error.code(), tonic::Code::Internal);
    }
}
