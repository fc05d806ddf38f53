//! The client plane: the gRPC services clients call. The bead store (`strand.v1.Beads`) and its
//! orchestration layer (`Namespaces`, `Formulas`, `Orders`, `Molecules`, `Work`, `Mail`, `Convoys`) are
//! here; `watch.rs` serves `Events` (the event log and watch streams), `cluster.rs` serves
//! `strand.v1.Cluster` (status, fanned out to every member). Protobuf requests are converted by
//! `api::convert` and answered by the leader plane through one generic handler, [`serve`]; the
//! handlers of every service the leader plane answers whole are generated from the RPC table
//! (`api::registry`), so a new RPC in `strand.proto` is served with no line here. This plane only
//! wires them together, and is the one place the leader plane's failures
//! become gRPC statuses.

mod cluster;
mod watch;

use std::sync::Arc;

use api::convert::{Call, FromAnswer, IntoCall, refusal_to_status};
use api::proto::{self as pb};
use raft_store::Disk;
use tonic::{Request, Response, Status};

pub use cluster::ClusterService;

use crate::leader::{Leader, Unavailable};

/// The SHA-256 of the bearer token a request carries (`None`: it carries none). A malformed
/// `authorization` header is refused as UNAUTHENTICATED, whether auth is on or not.
pub fn credential_of(metadata: &tonic::metadata::MetadataMap) -> Result<Option<api::auth::TokenHash>, Status> {
    match metadata.get(api::auth::AUTHORIZATION_HEADER) {
        None => Ok(None),
        Some(value) => api::auth::parse_bearer(value.as_bytes()).map(Some).map_err(refusal_to_status),
    }
}

/// The gRPC status of a request no leader could serve.
fn unavailable(error: Unavailable) -> Status {
    Status::unavailable(error.0)
}

/// Refuses a request once this node was removed from the cluster, with the reason, marked final
/// for this endpoint: a client moves to another node at once, or fails at once when it has no
/// other (see `api::client`).
pub fn refuse_if_removed<D: Disk>(core: &crate::core::NodeCore<D>) -> Result<(), Status> {
    match core.removed() {
        Some(message) => {
            let mut metadata = tonic::metadata::MetadataMap::new();
            metadata.insert(api::client::ENDPOINT_FINAL_HEADER, tonic::metadata::MetadataValue::from_static("removed"));
            Err(Status::with_metadata(tonic::Code::Unavailable, message, metadata))
        }
        None => Ok(()),
    }
}

/// Serves any unary RPC of the table: converts it, writes it through Raft or reads it with the
/// consistency it asks for, converts the answer.
pub async fn serve<D: Disk, Req: IntoCall, Resp: FromAnswer>(
    leader: &Leader<D>,
    request: Request<Req>,
) -> Result<Response<Resp>, Status> {
    refuse_if_removed(leader.core())?;
    let now = leader.core().clock.now();
    let credential = credential_of(request.metadata())?;
    let answer = match request.into_inner().into_call(now).map_err(refusal_to_status)? {
        Call::Write(mut write) => {
            write.credential = credential;
            let answer = leader.write(write).await;
            // A fault point of the simulator (nothing fires in any other build): the write took
            // effect and its answer is lost, as when a connection breaks after the commit.
            if answer.is_ok() && raft_store::faults::fire(raft_store::faults::FaultPoint::ResponseDrop).is_some() {
                if leader.core().planted == Some(crate::PlantedBug::LostAnswerRefused) {
                    return Err(refusal_to_status(api::outcome::Refusal::Invalid("the answer was lost".into())));
                }
                return Err(Status::unavailable("the answer was lost (a simulated fault point); retry the request"));
            }
            answer
        }
        Call::Read(mut read) => {
            read.credential = credential;
            leader.read(read).await
        }
    }
    .map_err(unavailable)?;
    Resp::from_answer(answer).map(Response::new)
}

/// Declares a service that answers through the node's leader plane.
macro_rules! leader_service {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub struct $name<D: Disk> {
            leader: Arc<Leader<D>>,
        }

        impl<D: Disk> $name<D> {
            /// Serves this node's replica, writing through its leader plane.
            pub fn new(leader: Arc<Leader<D>>) -> Self {
                $name { leader }
            }
        }
    };
}

leader_service!(
    /// The `strand.v1.Events` service: event log pages and watch streams (`watch.rs`).
    EventsService
);

/// Declares every service the leader plane answers whole, from the RPC table
/// (`api::registry`): its struct, and a handler per RPC that serves it through [`serve`].
macro_rules! leader_services {
    ($( $service:ident $server_mod:ident :: $server_trait:ident $name:ident {
        $( $variant:ident $method:ident $request:ident $response:ident, )*
    } )*) => {
        $(
            leader_service!(
                #[doc = concat!("The `strand.v1.", stringify!($service), "` service.")]
                $name
            );

            #[tonic::async_trait]
            impl<D: Disk> api::proto::$server_mod::$server_trait for $name<D> {
                $(
                    async fn $method(
                        &self,
                        request: Request<pb::$request>,
                    ) -> Result<Response<pb::$response>, Status> {
                        serve(&self.leader, request).await
                    }
                )*
            }
        )*
    };
}

api::for_each_leader_service!(leader_services);
