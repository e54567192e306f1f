//! Child processes of the interop tests: killed when dropped, talked to by lines. The
//! Python greeter client and the grpc-go one (`interop/grpc-go`) speak the same commands.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The Python greeter client (`tests/python/greeter_client.py`) as a child process.
pub struct PythonClient {
    _child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

/// What one `call N` command got.
#[derive(Debug)]
pub struct Calls {
    /// The addresses that answered, sorted, with the calls each answered.
    pub answered: std::collections::BTreeMap<String, u64>,
    /// The failed calls' codes and details.
    pub errors: Vec<String>,
}

impl Calls {
    /// The addresses that answered, sorted.
    pub fn addresses(&self) -> Vec<String> {
        self.answered.keys().cloned().collect()
    }
}

impl PythonClient {
    /// Starts the client of `target` with `python`, with extra environment `env`.
    pub fn start(python: &std::path::Path, target: &str, env: &[(&str, &str)]) -> PythonClient {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/python/greeter_client.py"
        );
        let mut command = Command::new(python);
        command.arg(script);
        PythonClient::spawn(command, target, env)
    }

    /// Starts the grpc-go client (`interop/grpc-go`, built at `binary`) of `target`, with
    /// extra environment `env`.
    pub fn start_grpc_go(
        binary: &std::path::Path,
        target: &str,
        env: &[(&str, &str)],
    ) -> PythonClient {
        PythonClient::spawn(Command::new(binary), target, env)
    }

    fn spawn(mut command: Command, target: &str, env: &[(&str, &str)]) -> PythonClient {
        command
            .arg(target)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().expect("the client starts");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        PythonClient {
            _child: child,
            stdin,
            lines,
        }
    }

    /// Makes `count` calls, one after another.
    pub async fn call(&mut self, count: usize) -> Calls {
        self.call_with(count, &[]).await
    }

    /// Makes `count` calls, one after another, each carrying the request `metadata`
    /// (headers such as `dubbo.tag`).
    pub async fn call_with(&mut self, count: usize, metadata: &[(&str, &str)]) -> Calls {
        let mut command = format!("call {count}");
        for (key, value) in metadata {
            command.push_str(&format!(" {key}={value}"));
        }
        command.push('\n');
        self.stdin
            .write_all(command.as_bytes())
            .await
            .expect("python reads commands");
        let line = tokio::time::timeout(Duration::from_secs(120), self.lines.next_line())
            .await
            .expect("python answers in time")
            .expect("python's output is readable")
            .expect("python is still running");
        let value: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
        let answered = value["answered"]
            .as_object()
            .expect("answered")
            .iter()
            .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
            .collect();
        let errors = value["errors"]
            .as_array()
            .expect("errors")
            .iter()
            .map(|e| e.as_str().unwrap_or_default().to_owned())
            .collect();
        Calls { answered, errors }
    }

    /// Calls in rounds of `count` until `done` holds for a round; panics after `limit`.
    pub async fn call_until(
        &mut self,
        count: usize,
        limit: Duration,
        what: &str,
        done: impl Fn(&Calls) -> bool,
    ) -> Calls {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let calls = self.call(count).await;
            if done(&calls) {
                return calls;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!("timed out after {limit:?} waiting for {what}; last round: {calls:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
