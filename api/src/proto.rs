//! The generated protobuf and gRPC types of package `strand.v1` (see `api/proto/strand.proto`).
//! Nothing outside [`crate::convert`] and the gRPC plumbing should build or read these by field.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("strand.v1");

/// The encoded descriptor set of the services clients call, for gRPC reflection on the client
/// listener: the schema without `strand.v1.Raft`, the internal service that only the peer
/// listener serves.
pub fn client_descriptor_set() -> &'static [u8] {
    static SET: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    SET.get_or_init(|| {
        let mut set: prost_types::FileDescriptorSet = prost::Message::decode(crate::decode_budget::DESCRIPTOR)
            .expect("the build script writes a valid descriptor set");
        for file in &mut set.file {
            file.service.retain(|service| service.name() != "Raft");
        }
        prost::Message::encode_to_vec(&set)
    })
}
