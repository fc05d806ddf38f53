//! Generates the gRPC code of `proto/strand.proto` (needs `protoc`, installed by `.ci/run` and
//! the Makefile).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/strand.proto");
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    // Type names let the codec find a message's schema; the descriptor set is that schema
    // (`src/decode_budget.rs`).
    let mut config = tonic_prost_build::Config::new();
    config.enable_type_names();
    tonic_prost_build::configure()
        .codec_path("crate::decode_budget::BudgetCodec")
        .file_descriptor_set_path(out_dir.join("strand_descriptor.bin"))
        .compile_with_config(config, &["proto/strand.proto"], &["proto"])?;
    Ok(())
}
