//! The registry of RPCs: one table, derived from `proto/strand.proto` by `build.rs`, that the
//! plumbing of every unary client RPC is generated from, so none of it is written per RPC and
//! none of it can drift:
//! - [`ClientRpc`], the protobuf request of one unary RPC tagged by RPC, with its size and the
//!   call that sends it ([`crate::client`]);
//! - the node's handlers of every client service whose RPCs are all unary (`node/src/client`,
//!   through [`for_each_leader_service!`]); `Events`, which also streams `Watch`, is written by
//!   hand in `node/src/client/watch.rs`;
//! - the fuzz targets (`tests/tests/fuzz.rs`, through [`for_each_client_rpc!`]).
//!
//! What an RPC means (its command or query, its conversion, validation and application) is the
//! request's [`crate::convert::IntoCall`].

use crate::proto as pb;

include!(concat!(env!("OUT_DIR"), "/rpc_table.rs"));

/// Declares [`ClientRpc`] from the RPC table.
macro_rules! client_rpc_enum {
    ($( $service:ident $client_mod:ident :: $client:ident {
        $( $variant:ident $method:ident $request:ident $response:ident, )*
    } )*) => {
        /// The protobuf request of one unary client RPC, tagged by RPC (one variant per RPC of
        /// the table, named after its request message).
        #[derive(Clone, Debug)]
        pub enum ClientRpc {
            $( $(
                #[allow(missing_docs)]
                $variant(pb::$request),
            )* )*
        }

        impl ClientRpc {
            /// The encoded size of the request, in bytes.
            pub fn encoded_len(&self) -> usize {
                match self {
                    $( $( ClientRpc::$variant(request) => prost::Message::encoded_len(request), )* )*
                }
            }
        }

        $( $(
            impl From<pb::$request> for ClientRpc {
                fn from(request: pb::$request) -> ClientRpc {
                    ClientRpc::$variant(request)
                }
            }
        )* )*
    };
}

for_each_client_rpc!(client_rpc_enum);

/// How many unary client RPCs the table holds.
macro_rules! count_rpcs {
    ($( $service:ident $client_mod:ident :: $client:ident {
        $( $variant:ident $method:ident $request:ident $response:ident, )*
    } )*) => {
        [$( $( stringify!($variant), )* )*].len()
    };
}

/// The number of unary client RPCs (the fuzz test checks it covers as many).
pub const CLIENT_RPCS: usize = for_each_client_rpc!(count_rpcs);
