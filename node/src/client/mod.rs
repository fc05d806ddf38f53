//! The client plane: the gRPC services clients call. The bead store (`strand.v1.Beads`) and its
//! orchestration layer (`Namespaces`, `Formulas`, `Orders`, `Molecules`, `Work`, `Mail`, `Convoys`) are
//! here; `watch.rs` serves `Events` (the event log and watch streams), `cluster.rs` serves
//! `strand.v1.Cluster` (status, fanned out to every member). Protobuf requests are converted by
//! `api::convert` and answered by the leader plane through the shared [`write`] and [`read`]
//! paths; this plane only wires them together, and is the one place the leader plane's failures
//! become gRPC statuses.

mod cluster;
mod watch;

use std::sync::Arc;

use api::convert::{FromAnswer, IntoRead, IntoWrite, refusal_to_status};
use api::proto::auth_server::Auth;
use api::proto::beads_server::Beads;
use api::proto::convoys_server::Convoys;
use api::proto::formulas_server::Formulas;
use api::proto::mail_server::Mail;
use api::proto::molecules_server::Molecules;
use api::proto::namespaces_server::Namespaces;
use api::proto::orders_server::Orders;
use api::proto::work_server::Work;
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

/// Serves a write of any service: converts it, applies it through Raft, converts the answer.
pub async fn write<D: Disk, Req: IntoWrite, Resp: FromAnswer>(
    leader: &Leader<D>,
    request: Request<Req>,
) -> Result<Response<Resp>, Status> {
    let credential = credential_of(request.metadata())?;
    let mut write = request.into_inner().into_write().map_err(refusal_to_status)?;
    write.credential = credential;
    let answer = leader.write(write).await.map_err(unavailable)?;
    Resp::from_answer(answer).map(Response::new)
}

/// Serves a read of any service with the consistency it asks for.
pub async fn read<D: Disk, Req: IntoRead, Resp: FromAnswer>(
    leader: &Leader<D>,
    request: Request<Req>,
) -> Result<Response<Resp>, Status> {
    let now = leader.core().clock.now();
    let credential = credential_of(request.metadata())?;
    let mut read = request.into_inner().into_read(now).map_err(refusal_to_status)?;
    read.credential = credential;
    let answer = leader.read(read).await.map_err(unavailable)?;
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
    /// The `strand.v1.Beads` service.
    BeadsService
);
leader_service!(
    /// The `strand.v1.Namespaces` service.
    NamespacesService
);
leader_service!(
    /// The `strand.v1.Formulas` service.
    FormulasService
);
leader_service!(
    /// The `strand.v1.Orders` service.
    OrdersService
);
leader_service!(
    /// The `strand.v1.Molecules` service.
    MoleculesService
);
leader_service!(
    /// The `strand.v1.Work` service: sling, hook, purge.
    WorkService
);
leader_service!(
    /// The `strand.v1.Mail` service.
    MailService
);
leader_service!(
    /// The `strand.v1.Convoys` service.
    ConvoysService
);
leader_service!(
    /// The `strand.v1.Events` service: event log pages and watch streams.
    EventsService
);
leader_service!(
    /// The `strand.v1.Auth` service: enabling auth, and tokens.
    AuthService
);

#[tonic::async_trait]
impl<D: Disk> Beads for BeadsService<D> {
    async fn create(&self, request: Request<pb::CreateRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn get(&self, request: Request<pb::GetRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        read(&self.leader, request).await
    }
    async fn update(&self, request: Request<pb::UpdateRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn set_metadata(
        &self,
        request: Request<pb::SetMetadataRequest>,
    ) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn claim(&self, request: Request<pb::ClaimRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn lease_renew(&self, request: Request<pb::LeaseRenewRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn lease_release(
        &self,
        request: Request<pb::LeaseReleaseRequest>,
    ) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn claim_next(&self, request: Request<pb::ClaimNextRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn close(&self, request: Request<pb::CloseRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn reopen(&self, request: Request<pb::ReopenRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn delete(&self, request: Request<pb::DeleteRequest>) -> Result<Response<pb::Empty>, Status> {
        write(&self.leader, request).await
    }
    async fn list(&self, request: Request<pb::ListRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        read(&self.leader, request).await
    }
    async fn ready(&self, request: Request<pb::ReadyRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        read(&self.leader, request).await
    }
    async fn children(&self, request: Request<pb::ChildrenRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        read(&self.leader, request).await
    }
    async fn list_by_label(
        &self,
        request: Request<pb::ListByLabelRequest>,
    ) -> Result<Response<pb::BeadsResponse>, Status> {
        read(&self.leader, request).await
    }
    async fn dep_add(&self, request: Request<pb::DepAddRequest>) -> Result<Response<pb::Empty>, Status> {
        write(&self.leader, request).await
    }
    async fn dep_remove(&self, request: Request<pb::DepRemoveRequest>) -> Result<Response<pb::Empty>, Status> {
        write(&self.leader, request).await
    }
    async fn dep_list(
        &self,
        request: Request<pb::DepListRequest>,
    ) -> Result<Response<pb::DependenciesResponse>, Status> {
        read(&self.leader, request).await
    }
    async fn txn(&self, request: Request<pb::TxnRequest>) -> Result<Response<pb::TxnResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn import(&self, request: Request<pb::ImportRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn import_undo(&self, request: Request<pb::ImportUndoRequest>) -> Result<Response<pb::Empty>, Status> {
        write(&self.leader, request).await
    }
}

#[tonic::async_trait]
impl<D: Disk> Namespaces for NamespacesService<D> {
    async fn create(
        &self,
        request: Request<pb::NamespaceCreateRequest>,
    ) -> Result<Response<pb::NamespacesResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn delete(
        &self,
        request: Request<pb::NamespaceDeleteRequest>,
    ) -> Result<Response<pb::NamespacesResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn configure(
        &self,
        request: Request<pb::NamespaceConfigureRequest>,
    ) -> Result<Response<pb::NamespacesResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn list(
        &self,
        request: Request<pb::NamespaceListRequest>,
    ) -> Result<Response<pb::NamespacesResponse>, Status> {
        read(&self.leader, request).await
    }
}

#[tonic::async_trait]
impl<D: Disk> Formulas for FormulasService<D> {
    async fn put(&self, request: Request<pb::FormulaPutRequest>) -> Result<Response<pb::FormulasResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn delete(&self, request: Request<pb::FormulaDeleteRequest>) -> Result<Response<pb::Empty>, Status> {
        write(&self.leader, request).await
    }
    async fn get(&self, request: Request<pb::FormulaGetRequest>) -> Result<Response<pb::FormulasResponse>, Status> {
        read(&self.leader, request).await
    }
    async fn list(&self, request: Request<pb::FormulaListRequest>) -> Result<Response<pb::FormulasResponse>, Status> {
        read(&self.leader, request).await
    }
}

#[tonic::async_trait]
impl<D: Disk> Orders for OrdersService<D> {
    async fn put(&self, request: Request<pb::OrderPutRequest>) -> Result<Response<pb::OrdersResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn delete(&self, request: Request<pb::OrderDeleteRequest>) -> Result<Response<pb::Empty>, Status> {
        write(&self.leader, request).await
    }
    async fn run(&self, request: Request<pb::OrderRunRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn get(&self, request: Request<pb::OrderGetRequest>) -> Result<Response<pb::OrdersResponse>, Status> {
        read(&self.leader, request).await
    }
    async fn list(&self, request: Request<pb::OrderListRequest>) -> Result<Response<pb::OrdersResponse>, Status> {
        read(&self.leader, request).await
    }
}

#[tonic::async_trait]
impl<D: Disk> Molecules for MoleculesService<D> {
    async fn cook(&self, request: Request<pb::CookRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn status(&self, request: Request<pb::MolStatusRequest>) -> Result<Response<pb::ProgressResponse>, Status> {
        read(&self.leader, request).await
    }
}

#[tonic::async_trait]
impl<D: Disk> Work for WorkService<D> {
    async fn sling(&self, request: Request<pb::SlingRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn hook(&self, request: Request<pb::HookRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        read(&self.leader, request).await
    }
    async fn hook_claim(&self, request: Request<pb::HookClaimRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn purge_preview(
        &self,
        request: Request<pb::PurgePreviewRequest>,
    ) -> Result<Response<pb::PurgeResponse>, Status> {
        read(&self.leader, request).await
    }
    async fn purge(&self, request: Request<pb::PurgeRequest>) -> Result<Response<pb::PurgeResponse>, Status> {
        write(&self.leader, request).await
    }
}

#[tonic::async_trait]
impl<D: Disk> Mail for MailService<D> {
    async fn send(&self, request: Request<pb::MailSendRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn mark(&self, request: Request<pb::MailMarkRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn archive(&self, request: Request<pb::MailArchiveRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn inbox(&self, request: Request<pb::InboxRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        read(&self.leader, request).await
    }
    async fn thread(&self, request: Request<pb::ThreadRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        read(&self.leader, request).await
    }
}

#[tonic::async_trait]
impl<D: Disk> Convoys for ConvoysService<D> {
    async fn create(&self, request: Request<pb::ConvoyCreateRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn add(&self, request: Request<pb::ConvoyAddRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn land(&self, request: Request<pb::ConvoyLandRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn check(&self, request: Request<pb::ConvoyCheckRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn status(
        &self,
        request: Request<pb::ConvoyStatusRequest>,
    ) -> Result<Response<pb::ProgressResponse>, Status> {
        read(&self.leader, request).await
    }
    async fn stranded(&self, request: Request<pb::StrandedRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        read(&self.leader, request).await
    }
}

#[tonic::async_trait]
impl<D: Disk> Auth for AuthService<D> {
    async fn enable(&self, request: Request<pb::AuthEnableRequest>) -> Result<Response<pb::AuthResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn disable(&self, request: Request<pb::AuthDisableRequest>) -> Result<Response<pb::AuthResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn token_create(
        &self,
        request: Request<pb::TokenCreateRequest>,
    ) -> Result<Response<pb::AuthResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn token_revoke(
        &self,
        request: Request<pb::TokenRevokeRequest>,
    ) -> Result<Response<pb::AuthResponse>, Status> {
        write(&self.leader, request).await
    }
    async fn token_list(&self, request: Request<pb::TokenListRequest>) -> Result<Response<pb::AuthResponse>, Status> {
        read(&self.leader, request).await
    }
    async fn who_am_i(&self, request: Request<pb::WhoAmIRequest>) -> Result<Response<pb::AuthResponse>, Status> {
        read(&self.leader, request).await
    }
}
