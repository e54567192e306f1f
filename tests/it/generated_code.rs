//! The checked-in generated code is what the proto files generate today.
//!
//! The library builds without `protoc` because the MetadataServiceV2 code
//! (`src/rpc/generated.rs`, and `src/rpc/metadata_descriptor.bin` for reflection) and the
//! helloworld code of the examples and tests (`proto/generated/helloworld.rs`) are checked
//! in. This test runs the generator (`tonic-prost-build`, which needs `protoc`) into a
//! temporary directory and fails when a checked-in file differs. After changing a proto
//! file, regenerate with `INTROSPECT_REGENERATE=1 cargo test --test generated_code`.

use std::path::{Path, PathBuf};

/// A generated file: where the generator writes it, where it is checked in.
struct Generated {
    produced: &'static str,
    checked_in: &'static str,
}

const FILES: [Generated; 3] = [
    Generated {
        produced: "org.apache.dubbo.metadata.rs",
        checked_in: "src/rpc/generated.rs",
    },
    Generated {
        produced: "metadata_descriptor.bin",
        checked_in: "src/rpc/metadata_descriptor.bin",
    },
    Generated {
        produced: "helloworld.rs",
        checked_in: "proto/generated/helloworld.rs",
    },
];

fn generate(out: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let proto = root.join("proto");
    let result = tonic_prost_build::configure()
        .out_dir(out)
        .file_descriptor_set_path(out.join("metadata_descriptor.bin"))
        .compile_protos(
            &[proto.join("metadata_service_v2.proto")],
            std::slice::from_ref(&proto),
        )
        .and_then(|()| {
            tonic_prost_build::configure().out_dir(out).compile_protos(
                &[proto.join("helloworld.proto")],
                std::slice::from_ref(&proto),
            )
        });
    if let Err(e) = result {
        panic!(
            "generating code from proto/ failed (is protoc installed? scripts/setup.sh installs it): {e}"
        );
    }
}

#[test]
fn checked_in_generated_code_is_up_to_date() {
    let out = tempfile::tempdir().expect("a temporary directory");
    generate(out.path());
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let regenerate = std::env::var_os("INTROSPECT_REGENERATE").is_some();
    let mut stale = Vec::new();
    for file in &FILES {
        let fresh = std::fs::read(out.path().join(file.produced))
            .unwrap_or_else(|e| panic!("the generator wrote no {}: {e}", file.produced));
        let target = root.join(file.checked_in);
        if regenerate {
            std::fs::write(&target, &fresh)
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", file.checked_in));
            continue;
        }
        match std::fs::read(&target) {
            Ok(current) if current == fresh => {}
            Ok(_) => stale.push(format!(
                "{} differs from what the proto generates",
                file.checked_in
            )),
            Err(e) => stale.push(format!("{} cannot be read: {e}", file.checked_in)),
        }
    }
    assert!(
        stale.is_empty(),
        "checked-in generated code is stale:\n  {}\nRegenerate it with \
         `INTROSPECT_REGENERATE=1 cargo test --test generated_code` and commit the result.",
        stale.join("\n  ")
    );
}
