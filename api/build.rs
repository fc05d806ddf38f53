//! Generates the gRPC code of `proto/strand.proto` (needs `protoc`, installed by `.ci/run` and
//! the Makefile).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/strand.proto");
    tonic_prost_build::configure().compile_protos(&["proto/strand.proto"], &["proto"])?;
    Ok(())
}
