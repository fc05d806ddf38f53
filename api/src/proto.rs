//! The generated protobuf and gRPC types of package `strand.v1` (see `api/proto/strand.proto`).
//! Nothing outside [`crate::convert`] and the gRPC plumbing should build or read these by field.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("strand.v1");
