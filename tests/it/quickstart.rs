//! The README's quick start on ZooKeeper, run as written: the ```` ```sh quickstart ````
//! block of README.md, read from the file, run by bash in a temporary directory, and the
//! output its "output to expect" promises checked command by command.
//!
//! What differs from a reader's run, and only that: ZooKeeper is the test support's (the
//! block's `scripts/zookeeper.sh` lines are skipped and `127.0.0.1:2181` becomes its
//! address); `$PWD/target/debug` is the directory of the binaries this suite was built with;
//! and the providers' ports 50051 and 50052 become two free ports from the test support's
//! range (20000 to 30000, below Linux's ephemeral range: 50051 and 50052 are inside it, so
//! any socket of the suite bound to port 0 could hold one). Every such text must be in the
//! block, or the test fails saying the README changed. The block runs in a process group
//! of its own, killed whole when the test ends however it ends, so no provider outlives it.

use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::examples::{profile_dir, walkthrough_binaries};
use crate::support::markdown::{self, Block};
use crate::support::ports::free_low_port;
use crate::support::zookeeper::ZooKeeperServer;

/// How long the block may run before the test gives up on it (it takes about 12 s).
const DEADLINE: Duration = Duration::from_secs(60);
/// What each command of the block starts with, so a command's output is found by it.
const MARKER: &str = "@@@ command ";

/// A process group, killed (SIGKILL) when dropped: the block's shell and the providers it
/// runs in the background.
struct ProcessGroup(rustix::process::Pid);

impl ProcessGroup {
    /// Whether any process of the group still runs.
    fn alive(&self) -> bool {
        rustix::process::test_kill_process_group(self.0).is_ok()
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        let _ = rustix::process::kill_process_group(self.0, rustix::process::Signal::KILL);
    }
}

/// The block's commands: each with the line it starts on and its text (a here-document's
/// body and continued lines included), comments and blank lines left out.
fn commands(block: &Block) -> Vec<(usize, String)> {
    let mut commands = Vec::new();
    let mut lines = block.lines.iter();
    while let Some((number, line)) = lines.next() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let mut text = line.clone();
        while text.ends_with('\\') {
            let Some((_, next)) = lines.next() else { break };
            text.push('\n');
            text.push_str(next);
        }
        // A here-document: `<<'END'` or `<<END`, through the line `END`.
        if let Some(end) = markdown::heredoc_end(&text) {
            for (_, body) in lines.by_ref() {
                text.push('\n');
                text.push_str(body);
                if body.trim() == end {
                    break;
                }
            }
        }
        commands.push((*number, text));
    }
    commands
}

/// The quick start's block and the "output to expect" block after it.
fn quickstart_blocks() -> (Block, Block) {
    let readme = std::fs::read_to_string(markdown::root().join("README.md")).expect("README.md");
    let mut blocks = markdown::blocks(&readme).into_iter();
    let script = blocks
        .by_ref()
        .find(|b| b.info == "sh quickstart")
        .expect("README.md has a ```sh quickstart block");
    let expected = blocks
        .find(|b| b.info == "text")
        .expect("README.md has the quick start's output to expect, a ```text block after it");
    (script, expected)
}

/// A check of one command's output: the `nth` command (0-based) whose text contains
/// `command` prints `says`, where `{P1}` and `{P2}` stand for the providers' ports (50051 and
/// 50052 as written). Each is also checked to be in the README's output to expect.
struct Promise {
    command: &'static str,
    nth: usize,
    says: &'static str,
}

const PROMISES: &[Promise] = &[
    Promise {
        command: "cat provider-1.log",
        nth: 0,
        says: "greeter serving helloworld.Greeter on 127.0.0.1:{P1}",
    },
    Promise {
        command: "cat provider-1.log",
        nth: 0,
        says: "greeter serving helloworld.Greeter on 127.0.0.1:{P2}",
    },
    Promise {
        command: "greeter_consumer",
        nth: 0,
        says: "2 endpoint(s) of helloworld.Greeter at start",
    },
    // The heavier provider answers some of ten calls (three in four, each).
    Promise {
        command: "greeter_consumer",
        nth: 0,
        says: "  127.0.0.1:{P2}: ",
    },
    Promise {
        command: "greeter_consumer",
        nth: 0,
        says: "RESULT calls=10 ok=10 failed=0",
    },
    Promise {
        command: "rule check",
        nth: 0,
        says: "greeter.condition-router.yaml: a valid condition rule for helloworld.Greeter::.condition-router",
    },
    Promise {
        command: "rule check",
        nth: 0,
        says: "condition 1: when method = SayHello  then port != {P2}",
    },
    Promise {
        command: "rule put",
        nth: 0,
        says: "wrote dubbo/helloworld.Greeter::.condition-router: version ",
    },
    Promise {
        command: " route ",
        nth: 0,
        says: "no: condition rule helloworld.Greeter::.condition-router",
    },
    Promise {
        command: " route ",
        nth: 0,
        says: "rules in force: helloworld.Greeter::.condition-router",
    },
    Promise {
        command: "greeter_consumer",
        nth: 1,
        says: "  127.0.0.1:{P1}: 10\n",
    },
    Promise {
        command: "greeter_consumer",
        nth: 1,
        says: "RESULT calls=10 ok=10 failed=0",
    },
    Promise {
        command: "rule delete",
        nth: 0,
        says: "deleted dubbo/helloworld.Greeter::.condition-router (version ",
    },
];

/// `text` with the placeholders of a promise filled in.
fn fill(text: &str, p1: &str, p2: &str) -> String {
    text.replace("{P1}", p1).replace("{P2}", p2)
}

#[test]
fn the_readme_promises_what_its_quick_start_prints() {
    let (_, expected) = quickstart_blocks();
    let expected = expected.text();
    for promise in PROMISES {
        let says = fill(promise.says, "50051", "50052");
        assert!(
            expected.contains(&says),
            "README.md's quick start output no longer shows {says:?}, which \
             tests/it/quickstart.rs checks the run prints; update one or the other"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_readme_quick_start_runs_as_written() {
    let started = Instant::now();
    let Some(_binaries) = walkthrough_binaries() else {
        return;
    };
    let Some(zookeeper) = ZooKeeperServer::start().await else {
        return;
    };
    let (block, _) = quickstart_blocks();
    let (p1, p2) = (free_low_port(false), free_low_port(false));
    let profile = profile_dir();
    let replacements = [
        ("127.0.0.1:2181", zookeeper.address()),
        ("50051", p1.to_string()),
        ("50052", p2.to_string()),
        ("$PWD/target/debug", profile.display().to_string()),
    ];
    let mut commands = commands(&block);
    for (from, _) in &replacements {
        assert!(
            commands.iter().any(|(_, c)| c.contains(from)),
            "the quick start no longer has {from:?}, which this test replaces; update \
             tests/it/quickstart.rs"
        );
    }
    for (_, command) in &mut commands {
        for (from, to) in &replacements {
            *command = command.replace(from, to);
        }
    }
    let skipped = |c: &str| c.trim_start().starts_with("scripts/zookeeper.sh");
    assert_eq!(
        commands.iter().filter(|(_, c)| skipped(c)).count(),
        2,
        "the quick start starts and stops ZooKeeper with scripts/zookeeper.sh"
    );
    commands.retain(|(_, c)| !skipped(c));

    // One script: each command after a marker line, so that its output can be told apart.
    let mut script = String::from("set -euo pipefail\n");
    for (i, (_, command)) in commands.iter().enumerate() {
        script.push_str(&format!("echo '{MARKER}{i}'\n{command}\n"));
    }
    let dir = tempfile::TempDir::with_prefix("introspect-quickstart-").expect("a temporary dir");
    let output_path = dir.path().join("output.txt");
    let output = std::fs::File::create(&output_path).expect("create the output file");
    let mut shell = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(dir.path())
        .env_remove("INTROSPECT_REGISTRY")
        .env_remove("INTROSPECT_ETCD")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(output.try_clone().expect("the output file"))
        .stderr(output)
        .process_group(0)
        .spawn()
        .expect("run bash");
    let group = ProcessGroup(
        rustix::process::Pid::from_raw(i32::try_from(shell.id()).expect("a pid")).expect("a pid"),
    );
    let status = loop {
        if let Some(status) = shell.try_wait().expect("wait for bash") {
            break Some(status);
        }
        if started.elapsed() > DEADLINE {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let printed = std::fs::read_to_string(&output_path).unwrap_or_default();
    let listing = || {
        commands
            .iter()
            .enumerate()
            .map(|(i, (line, c))| format!("  {i} (README.md:{line}): {c}\n"))
            .collect::<String>()
    };
    let Some(status) = status else {
        panic!(
            "the quick start did not finish within {DEADLINE:?}; its commands:\n{}its \
             output:\n{printed}",
            listing()
        );
    };
    assert!(
        status.success(),
        "the quick start failed ({status}) at the last command its output names; its \
         commands:\n{}its output:\n{printed}",
        listing()
    );

    // Each command's output, by index.
    let mut outputs = vec![String::new(); commands.len()];
    let mut current = None;
    for line in printed.lines() {
        if let Some(i) = line
            .strip_prefix(MARKER)
            .and_then(|i| i.parse::<usize>().ok())
        {
            current = Some(i);
        } else if let Some(out) = current.and_then(|i| outputs.get_mut(i)) {
            out.push_str(line);
            out.push('\n');
        }
    }
    let output_of = |command: &str, nth: usize| -> &str {
        let i = commands
            .iter()
            .enumerate()
            .filter(|(_, (_, c))| c.contains(command))
            .nth(nth)
            .map(|(i, _)| i)
            .unwrap_or_else(|| {
                panic!(
                    "the quick start has no command {nth} containing {command:?}:\n{}",
                    listing()
                )
            });
        &outputs[i]
    };
    let (p1, p2) = (p1.to_string(), p2.to_string());
    for promise in PROMISES {
        let says = fill(promise.says, &p1, &p2);
        let out = output_of(promise.command, promise.nth);
        assert!(
            out.contains(&says),
            "command {} containing {:?} did not print {says:?}; it printed:\n{out}\nthe \
             whole output:\n{printed}",
            promise.nth,
            promise.command
        );
    }
    // `route` routes the first provider; the rule's consumer calls never reach the second.
    let route = output_of(" route ", 0);
    assert!(
        route
            .lines()
            .any(|l| l.starts_with(&format!("127.0.0.1:{p1} ")) && l.ends_with(" yes")),
        "route does not show 127.0.0.1:{p1} routed:\n{route}"
    );
    let after = output_of("greeter_consumer", 1);
    assert!(
        !after.contains(&format!("from 127.0.0.1:{p2}")),
        "with the rule in force, a call still went to 127.0.0.1:{p2}:\n{after}"
    );
    // The block stops its providers itself (`kill`, `wait`): nothing of it runs on.
    assert!(
        !group.alive(),
        "a process the quick start started still runs after it ended:\n{printed}"
    );
    drop(group);
    eprintln!("the quick start ran as written in {:?}", started.elapsed());
}
