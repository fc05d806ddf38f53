//! Strand's `raft-store` crate: the Raft log, the vote and the state machine on disk, for openraft.
//!
//! - [`disk`]: the storage trait ([`disk::Disk`]), with [`rocks::RocksDisk`] for real nodes and
//!   [`memory::MemoryDisk`] for the simulator, which drops unsynced writes on a crash.
//! - [`log_store`]: openraft's `RaftLogStorage` (log entries, vote, committed and purged ids).
//! - [`state_machine`]: openraft's `RaftStateMachine` over [`api::state::State`], with streamed
//!   file snapshots ([`snapshot`]) and consistency checkpoints' digests ([`consistency`]).
//!
//! Invariant: this is the only crate that knows RocksDB; it knows nothing of gRPC or the network.

pub mod backup;
pub mod codec;
pub mod consistency;
pub mod disk;
pub mod faults;
pub mod log_store;
pub mod memory;
pub mod rocks;
pub mod runtime;
pub mod snapshot;
pub mod state_machine;
pub mod types;
pub mod upgrade;

pub use disk::{Disk, Durability, Op, Space};
pub use log_store::{FlushMode, LogStore};
pub use memory::MemoryDisk;
pub use rocks::RocksDisk;
pub use snapshot::SnapshotFile;
pub use state_machine::{Applied, ApplyObserver, ApplyProbes, StateMachineStore};
pub use types::{NodeId, Runtime, TypeConfig};
