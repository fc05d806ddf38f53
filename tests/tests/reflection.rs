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
