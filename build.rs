//! Generates the MetadataServiceV2 client and server from the proto contract, and the
//! Greeter code the examples and tests include with `tonic::include_proto!("helloworld")`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    // Only the contract goes into the descriptor set the reflection service serves.
    tonic_prost_build::configure()
        .file_descriptor_set_path(out.join("metadata_descriptor.bin"))
        .compile_protos(&["proto/metadata_service_v2.proto"], &["proto"])?;
    tonic_prost_build::configure().compile_protos(&["proto/helloworld.proto"], &["proto"])?;
    println!("cargo:rerun-if-changed=proto/metadata_service_v2.proto");
    println!("cargo:rerun-if-changed=proto/helloworld.proto");
    Ok(())
}
