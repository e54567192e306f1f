//! Help that agrees with the documents: every `--flag` that README.md and docs/guide/*.md
//! give `introspect`, `greeter_provider` or `greeter_consumer` on a shell line exists in
//! that binary's `--help`, for `introspect` the help of the subcommand it follows.
//!
//! A shell line is a line of a ```` ```sh ```` (`bash`, `shell`, `console`) block, here-documents
//! and comments aside, or a `$ ` line of a ```` ```text ```` block; `cargo run -p
//! introspect-cli -- …` and `cargo run --example NAME -- …` name the binary too, their flags
//! after the `--`. The binaries are the ones this suite was built with (skipped, loudly,
//! when one is not built).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::examples::walkthrough_binaries;
use crate::support::markdown;

/// What a `--help` lists: each long flag and whether it takes a value, and the
/// subcommands.
#[derive(Default)]
struct Help {
    flags: BTreeMap<String, bool>,
    commands: BTreeSet<String>,
}

/// Reads clap's help text: `  -h, --help`, `      --registry <URL>  …`, and the names under
/// `Commands:`.
fn parse_help(text: &str) -> Help {
    let mut help = Help::default();
    let mut in_commands = false;
    for line in text.lines() {
        if line.trim_end().ends_with(':') && !line.starts_with(' ') {
            in_commands = line.trim_end() == "Commands:";
            continue;
        }
        let trimmed = line.trim_start();
        if in_commands && line.starts_with("  ") && !trimmed.starts_with('-') {
            if let Some(name) = trimmed.split_whitespace().next() {
                help.commands.insert(name.to_owned());
            }
            continue;
        }
        let option = trimmed
            .strip_prefix('-')
            .filter(|_| line.starts_with(' '))
            .map(|_| trimmed);
        let Some(option) = option else { continue };
        // `-h, --help` or `--registry <URL>` (a description may hold `, ` too).
        let long = match option.as_bytes() {
            [b'-', short, b',', b' ', ..] if short.is_ascii_alphanumeric() => &option[4..],
            _ => option,
        };
        if let Some(rest) = long.strip_prefix("--") {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            let after = &rest[name.len()..];
            let takes_value = after.starts_with(" <") || after.starts_with(" [<");
            help.flags.insert(format!("--{name}"), takes_value);
        }
    }
    help
}

/// The help of each binary and subcommand path, asked for once.
struct Helps {
    binaries: HashMap<&'static str, PathBuf>,
    cache: HashMap<(String, Vec<String>), Help>,
}

impl Helps {
    fn get(&mut self, binary: &str, path: &[String]) -> &Help {
        let key = (binary.to_owned(), path.to_vec());
        let exe = self.binaries[binary].clone();
        self.cache.entry(key).or_insert_with(|| help_of(&exe, path))
    }
}

fn help_of(exe: &Path, path: &[String]) -> Help {
    let output = Command::new(exe)
        .args(path)
        .arg("--help")
        .env_remove("INTROSPECT_REGISTRY")
        .env_remove("INTROSPECT_ETCD")
        .output()
        .unwrap_or_else(|e| panic!("run {} --help: {e}", exe.display()));
    assert!(
        output.status.success(),
        "{} {} --help failed: {}",
        exe.display(),
        path.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    parse_help(&String::from_utf8_lossy(&output.stdout))
}

/// The shell lines of a document: (line number, the command line, continuations joined).
fn shell_lines(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for block in markdown::blocks(text) {
        let shell = block.is_shell();
        let mut lines = block.lines.iter();
        while let Some((number, line)) = lines.next() {
            let line = match (shell, line.strip_prefix("$ ")) {
                (_, Some(prompted)) => prompted,
                (true, None) => line.as_str(),
                (false, None) => continue,
            };
            if line.trim_start().starts_with('#') {
                continue;
            }
            let mut joined = line.to_owned();
            while joined.ends_with('\\') {
                joined.pop();
                match lines.next() {
                    Some((_, next)) => joined.push_str(next),
                    None => break,
                }
            }
            // A here-document's body is not shell.
            if let Some(end) = markdown::heredoc_end(&joined) {
                lines.by_ref().find(|(_, body)| body.trim() == end);
            }
            found.push((*number, joined));
        }
    }
    found
}

/// The simple commands of a shell line, as words: split at `|`, `;`, `&&`, `||`, `&` and
/// cut at a ` #` comment.
fn simple_commands(line: &str) -> Vec<Vec<String>> {
    let line = line.split(" #").next().unwrap_or_default();
    let mut commands = vec![Vec::new()];
    for word in line.split_whitespace() {
        if matches!(word, "|" | ";" | "&&" | "||" | "&") {
            commands.push(Vec::new());
            continue;
        }
        let (word, ends) = match word.strip_suffix(';') {
            Some(word) => (word, true),
            None => (word, false),
        };
        let word = word.trim_matches(|c| c == '"' || c == '\'' || c == '`');
        if !word.is_empty() {
            commands.last_mut().expect("one").push(word.to_owned());
        }
        if ends {
            commands.push(Vec::new());
        }
    }
    commands.retain(|c| !c.is_empty());
    commands
}

/// Which binary a simple command runs, and its arguments.
fn invocation(words: &[String]) -> Option<(&'static str, &[String])> {
    const NAMES: [&str; 3] = ["introspect", "greeter_provider", "greeter_consumer"];
    let name_of = |word: &str| {
        let base = word.rsplit('/').next().unwrap_or(word);
        NAMES.into_iter().find(|n| *n == base)
    };
    if let Some(i) = words.iter().position(|w| name_of(w).is_some())
        && !words[..i].iter().any(|w| w == "cargo")
    {
        return Some((name_of(&words[i]).expect("found"), &words[i + 1..]));
    }
    let cargo = words.iter().position(|w| w == "cargo")?;
    let words = &words[cargo..];
    if words.get(1).map(String::as_str) != Some("run") {
        return None;
    }
    let separator = words.iter().position(|w| w == "--")?;
    let before = &words[..separator];
    let after = &words[separator + 1..];
    let value_of = |flag: &str| {
        before
            .iter()
            .position(|w| w == flag)
            .and_then(|i| before.get(i + 1))
            .map(String::as_str)
    };
    if let Some(example) = value_of("--example") {
        return name_of(example).map(|n| (n, after));
    }
    let introspect = value_of("-p") == Some("introspect-cli")
        || value_of("--package") == Some("introspect-cli")
        || value_of("--bin") == Some("introspect");
    introspect.then_some(("introspect", after))
}

#[test]
fn every_flag_the_documents_use_is_in_the_binaries_help() {
    let Some(binaries) = walkthrough_binaries() else {
        return;
    };
    let mut helps = Helps {
        binaries: binaries.into_iter().collect(),
        cache: HashMap::new(),
    };
    let mut failures = Vec::new();
    let mut checked = 0;
    for (file, text) in markdown::documents() {
        for (number, line) in shell_lines(&text) {
            for words in simple_commands(&line) {
                let Some((binary, args)) = invocation(&words) else {
                    continue;
                };
                let mut path: Vec<String> = Vec::new();
                let mut positional = false;
                let mut args = args.iter();
                while let Some(arg) = args.next() {
                    let help = helps.get(binary, &path);
                    if let Some(flag) = arg.strip_prefix("--").filter(|f| !f.is_empty()) {
                        let name = format!("--{}", flag.split('=').next().unwrap_or(flag));
                        checked += 1;
                        match help.flags.get(&name) {
                            Some(true) if !arg.contains('=') => {
                                args.next();
                            }
                            Some(_) => {}
                            None => failures.push(format!(
                                "{file}:{number}: `{name}` is not a flag of `{}` (its --help \
                                 lists {}): {line}",
                                std::iter::once(binary.to_owned())
                                    .chain(path.iter().cloned())
                                    .collect::<Vec<_>>()
                                    .join(" "),
                                help.flags.keys().cloned().collect::<Vec<_>>().join(" ")
                            )),
                        }
                    } else if !positional && help.commands.contains(arg.as_str()) {
                        path.push(arg.clone());
                    } else if !arg.starts_with('-') {
                        positional = true;
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "flags the documents use that the binaries do not have:\n{}",
        failures.join("\n")
    );
    eprintln!("{checked} flags of the documents' shell lines checked against --help");
    // The quick start alone gives these binaries a dozen flags: finding none means the
    // documents were not read.
    assert!(checked >= 12, "only {checked} flags found in the documents");
}

#[test]
fn the_help_reader_reads_clap_help() {
    let help = parse_help(
        "Usage: x [OPTIONS] <COMMAND>\n\nCommands:\n  rule  Rules\n  help  Print\n\n\
         Options:\n      --registry <URL>  The registry: a, b\n      --etcd <URLS>  x\n      --json  JSON\n  -h, --help  Help\n",
    );
    assert_eq!(
        help.commands,
        BTreeSet::from(["rule".to_owned(), "help".to_owned()])
    );
    assert_eq!(help.flags.get("--registry"), Some(&true));
    assert_eq!(help.flags.get("--etcd"), Some(&true));
    assert_eq!(help.flags.get("--json"), Some(&false));
    assert_eq!(help.flags.get("--help"), Some(&false));
    let words = simple_commands("cargo run --example greeter_provider -- --listen 127.0.0.1:1 # x");
    assert_eq!(
        invocation(&words[0]).map(|(b, a)| (b, a.to_vec())),
        Some((
            "greeter_provider",
            vec!["--listen".to_owned(), "127.0.0.1:1".to_owned()]
        ))
    );
    let words = simple_commands("sleep 2; X=1 target/debug/introspect --json apps >out 2>&1 &");
    assert_eq!(words.len(), 2);
    assert_eq!(invocation(&words[1]).map(|(b, _)| b), Some("introspect"));
}
