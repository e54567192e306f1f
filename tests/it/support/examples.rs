//! The project's example binaries, run as processes of their own: what a test needs when a
//! provider must die as a process dies (`SIGKILL`), or stop as a deploy stops it.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

/// `target/<profile>/`, where this test binary's `deps/` directory, the examples and the
/// workspace's binaries (`introspect`) are.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary sits in target/<profile>/deps")
        .to_path_buf()
}

/// The binaries a walk-through of the documents runs: `introspect` and the greeter
/// examples, by name, when all are built; `None` after a loud SKIPPED line when one is not
/// (`cargo test --workspace` builds them all; `cargo test --test it` alone leaves out the
/// `introspect` of the cli crate).
pub fn walkthrough_binaries() -> Option<Vec<(&'static str, PathBuf)>> {
    let dir = profile_dir();
    let binaries = vec![
        ("introspect", dir.join("introspect")),
        ("greeter_provider", dir.join("examples/greeter_provider")),
        ("greeter_consumer", dir.join("examples/greeter_consumer")),
    ];
    if let Some((_, missing)) = binaries.iter().find(|(_, path)| !path.is_file()) {
        eprintln!(
            "\n*** SKIPPED: {} is not built (run `cargo build --workspace --examples \
             --all-features`, or `cargo test --workspace`). This test did not run. ***\n",
            missing.display()
        );
        return None;
    }
    Some(binaries)
}

/// The example binary `name`, beside this test binary's directory (`target/<profile>/`).
pub fn example(name: &str) -> PathBuf {
    let path = profile_dir().join("examples").join(name);
    assert!(
        path.is_file(),
        "example {name} not built at {} (cargo test builds the examples)",
        path.display()
    );
    path
}

/// The example Greeter provider, running as a process of its own.
pub struct ExampleProvider {
    /// The port its Greeter (and MetadataService) listens on.
    pub port: u16,
    child: Child,
    /// The calls it processed, by request name (with `--log-requests`).
    requests: std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, u64>>>,
}

impl ExampleProvider {
    /// Starts `greeter_provider --registry URL --app APP` on a free loopback port and waits
    /// for the line that says where it serves (within 30 s).
    pub async fn start(registry: &str, app: &str) -> ExampleProvider {
        Self::start_with(registry, app, &[]).await
    }

    /// Like [`start`](Self::start), with more of its flags (`--log-requests` makes
    /// [`requests_named`](Self::requests_named) count).
    pub async fn start_with(registry: &str, app: &str, more: &[&str]) -> ExampleProvider {
        let mut child = Command::new(example("greeter_provider"))
            .args(["--registry", registry, "--app", app, "--drain-ms", "500"])
            .args(more)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the example provider starts");
        let stdout = child.stdout.take().expect("piped");
        let mut lines = BufReader::new(stdout).lines();
        let serving = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.expect("its output") {
                // "{app} serving {interface} on {address} (revision {revision})"
                if let Some(port) = line
                    .split_once(" on ")
                    .and_then(|(_, rest)| rest.split_whitespace().next())
                    .and_then(|address| address.rsplit_once(':'))
                    .and_then(|(_, port)| port.parse::<u16>().ok())
                {
                    return port;
                }
            }
            panic!("the example provider exited before serving");
        })
        .await
        .expect("the example provider says where it serves within 30 s");
        // Keep draining its output so that it never blocks on a full pipe, counting the
        // requests it logs.
        let requests =
            std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::new()));
        let counted = requests.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(name) = line.trim_end().strip_prefix("REQUEST name=") {
                    let mut counted = counted.lock().unwrap();
                    *counted.entry(name.to_owned()).or_insert(0) += 1;
                }
            }
        });
        ExampleProvider {
            port: serving,
            child,
            requests,
        }
    }

    /// How many calls named `name` it processed so far (started with `--log-requests`).
    pub fn requests_named(&self, name: &str) -> u64 {
        self.requests
            .lock()
            .unwrap()
            .get(name)
            .copied()
            .unwrap_or(0)
    }

    /// Stops it as a deploy does (`SIGTERM`: marked as stopping, drained, deregistered) and
    /// waits for it to exit.
    pub async fn terminate(mut self) {
        let pid = self
            .child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(rustix::process::Pid::from_raw)
            .expect("a process id");
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let _ = self.child.wait().await;
    }

    /// Kills it (`SIGKILL`), as a crash would: its registration is left to expire.
    pub async fn kill(mut self) {
        self.child.start_kill().expect("kill the example provider");
        let _ = self.child.wait().await;
    }
}
