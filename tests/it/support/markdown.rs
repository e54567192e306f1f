//! The fenced code blocks of the project's Markdown (README.md, docs/guide/*.md), with the
//! line each line of them sits on: what the tests that run or check the documents' shell
//! lines read.

use std::path::{Path, PathBuf};

/// One fenced block: its info string (`sh quickstart`, `text`, …) and its lines, each with
/// its 1-based line number in the file.
pub struct Block {
    /// The words after the opening fence.
    pub info: String,
    /// The lines between the fences, numbered as in the file.
    pub lines: Vec<(usize, String)>,
}

impl Block {
    /// Whether the block is shell (`sh`, `bash`, `shell`, `console`, whatever follows).
    pub fn is_shell(&self) -> bool {
        matches!(
            self.info.split_whitespace().next(),
            Some("sh" | "bash" | "shell" | "console")
        )
    }

    /// Its lines joined, as a script.
    pub fn text(&self) -> String {
        self.lines.iter().map(|(_, l)| format!("{l}\n")).collect()
    }
}

/// The fenced blocks (``` only) of `text`.
pub fn blocks(text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => {
                open = Some(Block {
                    info: info.trim().to_owned(),
                    lines: Vec::new(),
                });
            }
            (Some(_), Some(rest)) if rest.trim().is_empty() => {
                blocks.extend(open.take());
            }
            (Some(block), _) => block.lines.push((i + 1, line.to_owned())),
            (None, None) => {}
        }
    }
    blocks
}

/// The word that ends the here-document a shell line opens (`<<'END'`, `<<END`), if any.
pub fn heredoc_end(line: &str) -> Option<String> {
    let (_, rest) = line.split_once("<<")?;
    let end = rest
        .trim_start_matches('-')
        .split_whitespace()
        .next()?
        .trim_matches(|c| c == '\'' || c == '"');
    (!end.is_empty()).then(|| end.to_owned())
}

/// The repository's root (the library's manifest directory).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every docs/guide/*.md present, as (path relative to the root, text).
pub fn documents() -> Vec<(String, String)> {
    let mut names = vec!["README.md".to_owned()];
    if let Ok(entries) = std::fs::read_dir(root().join("docs/guide")) {
        let mut guide: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".md"))
            .map(|n| format!("docs/guide/{n}"))
            .collect();
        guide.sort();
        names.extend(guide);
    }
    names
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(root().join(Path::new(&name)))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, text)
        })
        .collect()
}
