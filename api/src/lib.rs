//! Strand's `api` crate: the bead model, the commands, the deterministic state machine, and the
//! wire protocol (protobuf, gRPC client).
//!
//! Invariant: nothing here knows RocksDB or openraft. The state machine ([`state`]) does no I/O,
//! no async, reads no clock and draws no random number; with the model, commands, answers and
//! parsers it applies, it is the pure core, which `tests/tests/tidy.rs`
//! (`the_state_machine_is_pure`) fences: no tonic, tokio, prost, protobuf types, clock or
//! randomness there. Tokens are drawn by the client ([`client::generate_token`]). Protobuf types appear only in [`proto`]
//! and are converted to and from the model in [`convert`], and for each registered command
//! ([`commands`]) in its file's `mod wire`, which the same test keeps apart from the command's
//! pure part. [`registry`] derives the plumbing of every RPC from the schema.
//!
//! Invariant: `api` imports in layers. The commands ([`commands`], with [`command`] and
//! [`convert`]) use the state machine's primitives, never the reverse: nothing [`state`] imports,
//! directly or not, reaches them, and the plain data a command carries that the state reads is
//! defined below both, in [`input`] (`tests/tests/tidy.rs`, `api_modules_import_in_layers`).

// First, so that the RPC table's macros are in scope in every module after it.
#[macro_use]
pub mod registry;

pub mod auth;
pub mod client;
pub mod command;
pub mod commands;
pub mod convert;
pub mod decode_budget;
pub mod formula;
pub mod go_duration;
pub mod input;
pub mod limits;
pub mod model;
pub mod order;
pub mod outcome;
pub mod printable;
pub mod proto;
pub mod request_ids;
pub mod state;
pub mod status;
pub mod suggest;
pub mod tls;
pub mod validate;
pub mod version;
