//! gRPC reflection on the client listener, checked with a gRPC client as grpcurl uses it: every
//! public service and health are listed and described, the internal Raft service is neither.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use tests::Cluster;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_reflection::pb::v1::{ServerReflectionRequest, ServerReflectionResponse};

async fn ask(address: &str, request: MessageRequest) -> Result<ServerReflectionResponse, tonic::Status> {
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{address}")).unwrap().connect().await.unwrap();
    let mut client = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest { host: String::new(), message_request: Some(request) };
    let mut answers = client.server_reflection_info(futures::stream::iter([request])).await.unwrap().into_inner();
    Ok(answers.message().await?.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_lists_and_describes_the_public_services_and_never_raft() {
    let cluster = Cluster::start(1, None);
    cluster.wait_for_leader().await;
    let address = &cluster.nodes[0].address;

    let listed = ask(address, MessageRequest::ListServices(String::new())).await.unwrap();
    let Some(MessageResponse::ListServicesResponse(listed)) = listed.message_response else { panic!("{listed:?}") };
    let names: Vec<String> = listed.service.into_iter().map(|service| service.name).collect();
    for expected in [
        "strand.v1.Beads",
        "strand.v1.Orders",
        "strand.v1.Auth",
        "strand.v1.Cluster",
        "strand.v1.Events",
        "grpc.health.v1.Health",
    ] {
        assert!(names.iter().any(|name| name == expected), "{expected} is listed: {names:?}");
    }
    assert!(!names.iter().any(|name| name.contains("Raft")), "the internal service is not listed: {names:?}");

    let described = ask(address, MessageRequest::FileContainingSymbol("strand.v1.Beads".into())).await.unwrap();
    let Some(MessageResponse::FileDescriptorResponse(files)) = described.message_response else {
        panic!("{described:?}")
    };
    let files: Vec<prost_types::FileDescriptorProto> =
        files.file_descriptor_proto.iter().map(|bytes| prost::Message::decode(bytes.as_slice()).unwrap()).collect();
    let services: Vec<&str> = files.iter().flat_map(|file| file.service.iter().map(|service| service.name())).collect();
    assert!(services.contains(&"Beads") && !services.contains(&"Raft"), "{services:?}");

    let raft = ask(address, MessageRequest::FileContainingSymbol("strand.v1.Raft".into())).await.unwrap_err();
    assert_eq!(raft.code(), tonic::Code::NotFound, "{raft:?}");
}

/// A refusal carries the standard rich error model in `grpc-status-details-bin`: a
/// `google.rpc.Status` with one `google.rpc.ErrorInfo` (its reason the refusal's kind, its domain
/// `strand.v1`, its metadata the refusal's fields), which any gRPC client decodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_carries_a_google_rpc_status_with_error_info() {
    use tonic_types::StatusExt;
    let cluster = Cluster::start(1, None);
    cluster.wait_for_leader().await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", cluster.nodes[0].address))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut beads = api::proto::beads_client::BeadsClient::new(channel);
    let request = api::proto::GetRequest { ids: vec!["st-nope".into()], ..Default::default() };
    let refused = beads.get(request).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::NotFound, "{refused:?}");
    let status: tonic_types::Status = prost::Message::decode(refused.details()).unwrap();
    assert_eq!((status.code, status.message.as_str()), (tonic::Code::NotFound as i32, refused.message()));
    let info = refused.get_details_error_info().expect("an ErrorInfo in the details");
    assert_eq!((info.reason.as_str(), info.domain.as_str()), ("NOT_FOUND", "strand.v1"), "{info:?}");
    assert_eq!(info.metadata.get("detail").map(String::as_str), Some("st-nope"), "{info:?}");
    // The CLI reads the same refusal back, its message unchanged.
    assert_eq!(
        api::convert::refusal_from_status(&refused),
        Some(api::outcome::Refusal::NotFound(api::model::BeadId::from("st-nope")))
    );
}
