//! The tool's own binary, run as a user runs it: none of the `INTROSPECT_*` variables of
//! the test's environment inherited, no terminal on standard input.

use std::process::{Command, Output, Stdio};

/// The binary with `args`, its output piped.
pub fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_introspect"));
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in [
        "INTROSPECT_ETCD",
        "INTROSPECT_REGISTRY",
        "INTROSPECT_USER",
        "INTROSPECT_PASSWORD",
    ] {
        command.env_remove(var);
    }
    command
}

/// Whether a run succeeded, and its standard output and error.
pub fn outcome(output: &Output) -> (bool, String, String) {
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs the binary with `args` to its end.
pub fn introspect(args: &[&str]) -> (bool, String, String) {
    outcome(&command(args).output().expect("the binary runs"))
}
