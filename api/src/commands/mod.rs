//! The registry of commands that each live in one file, as mini-redis keeps each command in one
//! file. A write's file holds its type, its validation, the role it needs, how it applies to a
//! namespace (through `NamespaceState`'s primitives), its protobuf mapping both ways and its
//! tests; a query's file holds its type, how it reads a namespace and its protobuf mapping; a
//! command with an answer shape of its own holds that shape too.
//!
//! Each file declares what it registers with a `registered!(KIND INDEX Type);` line at its top
//! level, one per registered type (KIND is `write`, `read` or `answer`); `build.rs` collects those
//! lines into the `registry!` lists and declares the files' modules, so nothing is written per
//! command anywhere else: its [`Command`] or [`Query`] variant (through [`RegisteredWrite`] and
//! [`RegisteredRead`]), its name, for a write its role in the token check and its validation, its
//! dispatch in the state machine, its proto dispatch for clients, and, for a write or an answer
//! (which are stored), its sample in the golden storage file (`tests/golden/storage-format.txt`).
//! A query is neither stored nor sent between nodes, so it has none. Its RPC is served, sent and
//! fuzzed from the RPC table (`crate::registry`), which `build.rs` reads from `strand.proto`.
//!
//! Adding a command: its request and response messages and its `rpc` line in `strand.proto`, its
//! file here, and its CLI subcommand.
//!
//! Each kind's indexes run 0, 1, 2, ... (the build stops on a gap or a repeat). A write's or an
//! answer's index is its stored variant index: a new one takes the next number, none is ever
//! reused, and the golden storage file pins every one's encoding. A read's index is not stored.
//!
//! Every query is registered but the three cluster-wide reads the token check answers itself
//! ([`Query::Namespaces`], [`Query::Tokens`], [`Query::WhoAmI`]). The writes made before the
//! registry are still the variants of [`Command`] ahead of [`Command::Registered`], converted in
//! `crate::convert`: their variant indexes are stored in every log.

use serde::{Deserialize, Serialize};

use crate::auth::Role;
use crate::command::{Command, Query};
use crate::model::{Actor, Namespace, Timestamp};
use crate::outcome::{Outcome, Refusal};
use crate::state::NamespaceState;

/// A command that changes one namespace, defined in a file of its own.
pub trait WriteCommand: Sized {
    /// Its name, for logs, metrics and refusals.
    const NAME: &'static str;
    /// The least role a token needs to send it (with auth enabled).
    const ROLE: Role;
    /// Checks its fields before the state machine applies it.
    fn validate(&self) -> Result<(), Refusal> {
        Ok(())
    }
    /// Applies it to its namespace, for `actor` (the proposal's), at the leader's time `now`.
    /// A refusal must leave the namespace unchanged.
    fn apply(&self, namespace: &mut NamespaceState, actor: &Actor, now: Timestamp) -> Result<Outcome, Refusal>;
    /// One value of it, whose encoding the golden storage file pins.
    fn sample() -> Self;
}

/// A query of one namespace, defined in a file of its own.
pub trait ReadCommand: Sized {
    /// Its name, for logs and refusals.
    const NAME: &'static str;
    /// Whether its namespace must exist: a read of one that does not is refused
    /// (`Refusal::NamespaceNotFound`) instead of answered as empty.
    const MUST_EXIST: bool = false;
    /// Answers it from the namespace `name`, whose state is `namespace`.
    fn read(&self, name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal>;
}

/// An answer shape of its own, defined with its command.
pub trait RegisteredShape: Sized {
    /// Its name, for the golden storage file.
    const NAME: &'static str;
    /// One value of it, whose encoding the golden storage file pins.
    fn sample() -> Self;
}

/// Declares the registered enums and their dispatch from the one-line-per-command lists.
macro_rules! registry {
    (
        writes { $( $write:ident($write_type:ty), )* }
        reads { $( $read:ident($read_type:ty), )* }
        answers { $( $answer:ident($answer_type:ty), )* }
    ) => {
        /// A write defined in its own file: the last variant of [`Command`].
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        pub enum RegisteredWrite {
            $(
                #[allow(missing_docs)]
                $write($write_type),
            )*
        }

        impl RegisteredWrite {
            /// Its name.
            pub fn name(&self) -> &'static str {
                match self {
                    $( RegisteredWrite::$write(_) => <$write_type as WriteCommand>::NAME, )*
                }
            }

            /// The least role a token needs to send it.
            pub fn role(&self) -> Role {
                match self {
                    $( RegisteredWrite::$write(_) => <$write_type as WriteCommand>::ROLE, )*
                }
            }

            /// Checks its fields.
            pub fn validate(&self) -> Result<(), Refusal> {
                match self {
                    $( RegisteredWrite::$write(command) => command.validate(), )*
                }
            }

            /// Applies it to its namespace.
            pub fn apply(&self, namespace: &mut NamespaceState, actor: &Actor, now: Timestamp) -> Result<Outcome, Refusal> {
                match self {
                    $( RegisteredWrite::$write(command) => command.apply(namespace, actor, now), )*
                }
            }

            /// Its protobuf request, for clients.
            pub fn to_request(&self, header: crate::proto::WriteHeader) -> crate::registry::ClientRpc {
                match self {
                    $( RegisteredWrite::$write(command) => crate::convert::ToWriteRequest::to_request(command, header), )*
                }
            }

            /// A sample of every registered write, in the list's order.
            pub fn samples() -> Vec<RegisteredWrite> {
                vec![$( RegisteredWrite::$write(<$write_type as WriteCommand>::sample()), )*]
            }
        }

        $(
            impl From<$write_type> for Command {
                fn from(command: $write_type) -> Command {
                    Command::Registered(RegisteredWrite::$write(command))
                }
            }
        )*

        /// A query defined in its own file: the last variant of [`Query`].
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        pub enum RegisteredRead {
            $(
                #[allow(missing_docs)]
                $read($read_type),
            )*
        }

        impl RegisteredRead {
            /// Its name.
            pub fn name(&self) -> &'static str {
                match self {
                    $( RegisteredRead::$read(_) => <$read_type as ReadCommand>::NAME, )*
                }
            }

            /// Answers it from a namespace.
            pub fn read(&self, name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
                match self {
                    $( RegisteredRead::$read(query) => query.read(name, namespace), )*
                }
            }

            /// Its protobuf request, for clients.
            pub fn to_request(&self, header: crate::proto::ReadHeader) -> crate::registry::ClientRpc {
                match self {
                    $( RegisteredRead::$read(query) => crate::convert::ToReadRequest::to_request(query, header), )*
                }
            }

            /// Whether its namespace must exist.
            pub fn must_exist(&self) -> bool {
                match self {
                    $( RegisteredRead::$read(_) => <$read_type as ReadCommand>::MUST_EXIST, )*
                }
            }
        }

        $(
            impl From<$read_type> for Query {
                fn from(query: $read_type) -> Query {
                    Query::Registered(RegisteredRead::$read(query))
                }
            }
        )*

        /// An answer shape defined with its command: the last variant of [`Outcome`].
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        pub enum RegisteredAnswer {
            $(
                #[allow(missing_docs)]
                $answer($answer_type),
            )*
        }

        impl RegisteredAnswer {
            /// Its name.
            pub fn name(&self) -> &'static str {
                match self {
                    $( RegisteredAnswer::$answer(_) => <$answer_type as RegisteredShape>::NAME, )*
                }
            }

            /// A sample of every registered answer shape, in the list's order.
            pub fn samples() -> Vec<RegisteredAnswer> {
                vec![$( RegisteredAnswer::$answer(<$answer_type as RegisteredShape>::sample()), )*]
            }
        }

        $(
            impl From<$answer_type> for Outcome {
                fn from(answer: $answer_type) -> Outcome {
                    Outcome::Registered(RegisteredAnswer::$answer(answer))
                }
            }
        )*
    };
}

/// A command file's registration, read by `build.rs` (it expands to nothing in the file, which
/// sees it because the files' modules are declared after it).
macro_rules! registered {
    ($kind:ident $index:literal $name:ident) => {};
}

// The command files' modules and the `registry!` call of what they register (`build.rs`).
include!(concat!(env!("OUT_DIR"), "/commands_registry.rs"));
