//! Generates the MetadataServiceV2 client and server from the proto contract.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let descriptor =
        std::path::PathBuf::from(std::env::var("OUT_DIR")?).join("metadata_descriptor.bin");
    tonic_prost_build::configure()
        .file_descriptor_set_path(descriptor)
        .compile_protos(&["proto/metadata_service_v2.proto"], &["proto"])?;
    println!("cargo:rerun-if-changed=proto/metadata_service_v2.proto");
    Ok(())
}
