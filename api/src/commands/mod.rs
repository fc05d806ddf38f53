//! The registry: every command lives in one file of this folder, as mini-redis keeps each
//! command in one file. A write's file holds its type, its validation, the role it needs, the
//! actors it names, how it applies (to one namespace through `NamespaceState`'s methods, or to
//! the whole state through `State`'s), its samples and its protobuf mapping both ways; a query's
//! file holds its type, how it reads a namespace and its protobuf mapping; a command with an
//! answer shape of its own registers that shape and holds its sample and mapping (the shape
//! itself is defined in `crate::outcome`). A command added since the registry keeps its tests in
//! its file; the older ones' are in `crate::state`'s tests.
//!
//! The commands are the layer above the state machine, as mini-redis's `cmd` uses its `Db`: they
//! use the state's primitives, and the state imports nothing of them. The plain data a command
//! carries that the state reads (a bead's fields, a filter, a controller action) is defined in
//! `crate::input` and re-exported by its command's file. Three files here register nothing: the
//! dispatch, `apply.rs` (how `State` applies a proposal and answers a query), `authorize.rs`
//! (the token check of a command or a read), and `samples.rs` (the golden file's sample values).
//!
//! Each file declares what it registers with a `registered!(KIND INDEX Name [Type]);` line at its
//! top level (Type defaults to Name). KIND is `write` (a write to one namespace), `bead_write` (a
//! write to beads and their edges, which a transaction may also hold), `cluster_write` (a write to
//! the whole state: namespaces themselves, auth, the controller), `read` or `answer`. `build.rs`
//! collects those lines into the `registry!` lists and declares the files' modules, so nothing is
//! written per command anywhere else in `api`: its [`Command`] variant (a write's INDEX is its
//! variant index) or its [`Query`] variant (through [`RegisteredRead`]), its name, for a write its
//! role in the token check, its validation and the actors it names, its dispatch in the state
//! machine, its proto dispatch for clients (for a bead write, its place in a transaction's
//! protobuf too), and, for a write or an answer (which are stored), its samples in the golden
//! storage file (`tests/golden/storage-format.txt`). A query is neither stored nor sent between
//! nodes, so it has none. Its RPC is served, sent and fuzzed from the RPC table
//! (`crate::registry`), which `build.rs` reads from `strand.proto`.
//!
//! Adding a command: its request and response messages and its `rpc` line in `strand.proto`, its
//! file here, and its CLI subcommand. A bead write also takes a line in the `TxnWrite` oneof of
//! `strand.proto`, named as its variant, and an op in `strand tx` (`cli/src/bulk/tx.rs`) when a
//! transaction document should carry it. The command files' modules are declared by generated
//! code, which `cargo fmt` does not follow: `make fmt` formats them too.
//!
//! Each kind's indexes run 0, 1, 2, ... (writes of all three kinds share one sequence; the build
//! stops on a gap or a repeat). A write's or an answer's index is its stored variant index: a new
//! one takes the next number, none is ever reused, and the golden storage file pins every one's
//! encoding. A read's index is not stored.
//!
//! Every query is registered but the three cluster-wide reads the token check answers itself
//! ([`Query::Namespaces`], [`Query::Tokens`], [`Query::WhoAmI`]).

use serde::{Deserialize, Serialize};

use crate::auth::Role;
use crate::command::{Proposal, Query};
use crate::model::{Actor, Namespace, Timestamp};
use crate::outcome::{Answer, Outcome, Refusal};
use crate::state::{NamespaceState, State};

/// What a write to one namespace applies with, besides the namespace: the proposal's namespace
/// name and actor, and the state's clock.
pub struct Context<'a> {
    /// The namespace's name.
    pub name: &'a Namespace,
    /// Who sent the command (recorded in its events; empty when the client named no one).
    pub actor: &'a Actor,
    /// The state's clock once this proposal is applied: the latest time any applied proposal
    /// carried (the leader's clock when it proposed), so it never runs backwards.
    pub now: Timestamp,
}

/// A write, defined in a file of its own. It applies as a [`NamespaceWrite`], a
/// [`BeadWriteCommand`] or a [`ClusterWrite`], as its registration says.
pub trait WriteCommand: Sized {
    /// Its name, for logs, metrics and refusals.
    const NAME: &'static str;
    /// The least role a token needs to send it (with auth enabled).
    const ROLE: Role;
    /// Its name; a command of several kinds names each (`Auth`).
    fn name(&self) -> &'static str {
        Self::NAME
    }
    /// Checks its fields before the state machine applies it.
    fn validate(&self) -> Result<(), Refusal> {
        Ok(())
    }
    /// An actor other than `own` it acts for (a claimant, an assignee, a sender): an agent token
    /// may act only as its own actor.
    fn other_actor<'a>(&'a self, _own: &str) -> Option<&'a str> {
        None
    }
    /// Fills every claimant it leaves empty with `actor` (a client that named no one acts as its
    /// token's actor).
    fn fill_claimants(&mut self, _actor: &Actor) {}
    /// Values of it whose encodings the golden storage file pins: one, or one per kind of it.
    fn samples() -> Vec<Self>;
}

/// A claimant other than `own`, for [`WriteCommand::other_actor`]: an empty claimant is not
/// `own` either (the node fills it in first, [`fill_claimant`]).
pub(crate) fn claimant<'a>(claimant: &'a Actor, own: &str) -> Option<&'a str> {
    (claimant.0 != own).then_some(claimant.0.as_str())
}

/// A name other than `own` that a write gives a bead (an assignee, a sender), for
/// [`WriteCommand::other_actor`]; an empty one names no one.
pub(crate) fn named<'a>(name: &'a str, own: &str) -> Option<&'a str> {
    (!name.is_empty() && name != own).then_some(name)
}

/// Fills an empty claimant with `actor`, for [`WriteCommand::fill_claimants`].
pub(crate) fn fill_claimant(claimant: &mut Actor, actor: &Actor) {
    if claimant.0.is_empty() {
        *claimant = actor.clone();
    }
}

/// A write to one namespace, which it creates when the proposal may.
pub trait NamespaceWrite: WriteCommand {
    /// Applies it to its namespace. A refusal must leave the namespace unchanged.
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer;
}

/// A write to beads and their edges: applied alone or as one write of a transaction.
pub trait BeadWriteCommand: WriteCommand {
    /// Applies it to its namespace at `now`. A refusal must leave the namespace unchanged.
    fn apply(&self, namespace: &mut NamespaceState, now: Timestamp) -> Answer;
    /// Itself with every `$N` reference of a transaction resolved (`txn::References`).
    fn resolved(&self, references: &txn::References) -> Result<Self, Refusal>;
}

/// A write to the whole state rather than one namespace's.
pub trait ClusterWrite: WriteCommand {
    /// Applies it, as carried by `proposal`, at `now`.
    fn apply(&self, state: &mut State, proposal: &Proposal, now: Timestamp) -> Answer;
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

/// An answer shape of its own, registered by its command (defined in `crate::outcome`).
pub trait RegisteredShape: Sized {
    /// Its name, for the golden storage file.
    const NAME: &'static str;
    /// One value of it, whose encoding the golden storage file pins.
    fn sample() -> Self;
}

/// Applies one registered write, by its kind.
macro_rules! apply_write {
    (write, $command:ident, $state:ident, $proposal:ident, $now:ident) => {{
        let context = Context { name: &$proposal.namespace, actor: &$proposal.actor, now: $now };
        NamespaceWrite::apply($command, $state.namespace_of($proposal)?, &context)
    }};
    (bead_write, $command:ident, $state:ident, $proposal:ident, $now:ident) => {
        BeadWriteCommand::apply($command, $state.namespace_of($proposal)?, $now)
    };
    (cluster_write, $command:ident, $state:ident, $proposal:ident, $now:ident) => {
        ClusterWrite::apply($command, $state, $proposal, $now)
    };
}

/// A registered write's bead-write view, by its kind.
macro_rules! bead_write_of {
    (bead_write, $variant:ident, $command:ident) => {
        Some(BeadWriteView::$variant($command))
    };
    ($kind:ident, $variant:ident, $command:ident) => {{
        let _ = $command;
        None
    }};
}

/// Declares the registered enums and their dispatch from the one-line-per-command lists.
macro_rules! registry {
    (
        writes { $( $kind:ident $write:ident($write_module:ident :: $write_type:ident), )* }
        bead_writes { $( $bead:ident($bead_module:ident :: $bead_type:ident), )* }
        reads { $( $read:ident($read_type:ty), )* }
        answers { $( $answer:ident($answer_type:ty), )* }
    ) => {
        /// Every write's type, by name (`crate::command` re-exports them).
        pub mod writes {
            $( pub use super::$write_module::$write_type; )*
        }
        pub use writes::*;

        /// A mutating command: one variant per registered write, in index order. Every variant
        /// is applied atomically or refused with no effect. Stored in the log by its variant
        /// index: a new write takes the next index (`tests/golden/storage-format.txt` pins every
        /// variant's encoding).
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        pub enum Command {
            $(
                #[doc = concat!("See [`", stringify!($write_type), "`].")]
                $write($write_type),
            )*
        }

        impl Command {
            /// A short name for logs and metrics.
            pub fn name(&self) -> &'static str {
                match self {
                    $( Command::$write(command) => WriteCommand::name(command), )*
                }
            }

            /// The least role a token needs to send it.
            pub fn role(&self) -> Role {
                match self {
                    $( Command::$write(_) => <$write_type as WriteCommand>::ROLE, )*
                }
            }

            /// Checks its fields before the state machine applies it.
            pub fn validate(&self) -> Result<(), Refusal> {
                match self {
                    $( Command::$write(command) => command.validate(), )*
                }
            }

            /// An actor other than `own` it acts for.
            pub fn other_actor<'a>(&'a self, own: &str) -> Option<&'a str> {
                match self {
                    $( Command::$write(command) => command.other_actor(own), )*
                }
            }

            /// Fills every claimant it leaves empty with `actor`.
            pub fn fill_claimants(&mut self, actor: &Actor) {
                match self {
                    $( Command::$write(command) => command.fill_claimants(actor), )*
                }
            }

            /// Applies it, as carried by `proposal`, to `state` at `now`.
            pub(crate) fn apply(&self, state: &mut State, proposal: &Proposal, now: Timestamp) -> Answer {
                match self {
                    $( Command::$write(command) => apply_write!($kind, command, state, proposal, now), )*
                }
            }

            /// Its bead-write view, when it is a write to beads and their edges (which a
            /// transaction may hold).
            pub(crate) fn as_bead_write(&self) -> Option<BeadWriteView<'_>> {
                match self {
                    $( Command::$write(command) => bead_write_of!($kind, $write, command), )*
                }
            }

            /// Whether it is a write to beads and their edges, which a transaction may hold.
            pub fn is_bead_write(&self) -> bool {
                self.as_bead_write().is_some()
            }

            /// Its protobuf request, for clients; `None` for a command no client sends (a
            /// controller action).
            pub fn to_request(&self, header: crate::proto::WriteHeader) -> Option<crate::registry::ClientRpc> {
                match self {
                    $( Command::$write(command) => crate::convert::ToWriteRequest::to_request(command, header), )*
                }
            }

            /// The samples of every write, in index order.
            pub fn samples() -> Vec<Command> {
                let mut samples = Vec::new();
                $( samples.extend(<$write_type as WriteCommand>::samples().into_iter().map(Command::$write)); )*
                samples
            }
        }

        $(
            impl From<$write_type> for Command {
                fn from(command: $write_type) -> Command {
                    Command::$write(command)
                }
            }
        )*

        /// A write to beads and their edges, borrowed from its [`Command`].
        #[derive(Clone, Copy, Debug)]
        pub(crate) enum BeadWriteView<'a> {
            $(
                #[allow(missing_docs)]
                $bead(&'a $bead_type),
            )*
        }

        impl BeadWriteView<'_> {
            /// Applies it to `namespace` at `now` as one write of a transaction, with every `$N`
            /// reference resolved first.
            pub(crate) fn apply_resolved(
                self,
                references: &txn::References,
                namespace: &mut NamespaceState,
                now: Timestamp,
            ) -> Answer {
                match self {
                    $(
                        BeadWriteView::$bead(command) => {
                            let resolved = BeadWriteCommand::resolved(command, references)?;
                            BeadWriteCommand::apply(&resolved, namespace, now)
                        }
                    )*
                }
            }

            /// The names of the writes a transaction may hold.
            pub(crate) fn names() -> Vec<&'static str> {
                vec![$( <$bead_type as WriteCommand>::NAME, )*]
            }
        }

        /// The command of one write of a transaction (its inner header is ignored).
        pub(crate) fn txn_write_of(write: crate::proto::TxnWrite) -> Result<Command, Refusal> {
            use crate::convert::IntoWrite;
            use crate::proto::txn_write::Write;
            let request = match write.write {
                $( Some(Write::$bead(request)) => request.into_write(), )*
                None => return Err(Refusal::Invalid("a transaction write names no operation".into())),
            };
            Ok(request?.command)
        }

        /// The protobuf form of one write of a transaction; `None` for a command a transaction
        /// cannot hold. The inner request keeps an empty header, which the server ignores.
        pub(crate) fn txn_write_to_proto(command: &Command) -> Option<crate::proto::TxnWrite> {
            use crate::proto::txn_write::Write;
            use crate::registry::ClientRpc;
            let write = match command.to_request(crate::proto::WriteHeader::default())? {
                $( ClientRpc::$bead(request) => Write::$bead(request), )*
                _ => return None,
            };
            Some(crate::proto::TxnWrite { write: Some(write) })
        }

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

        /// The enum of registered answers is defined in `crate::outcome`, below the state
        /// machine, and generated from the same registrations (`build.rs`).
        pub use crate::outcome::RegisteredAnswer;

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
    ($kind:ident $index:literal $name:ident $type:ident) => {};
}

// The command files' modules and the `registry!` call of what they register (`build.rs`).
include!(concat!(env!("OUT_DIR"), "/commands_registry.rs"));
