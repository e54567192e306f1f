//! The README and the guide (`docs/guide/`) say what the crate does: the README's feature
//! table and every "on/off by default" either writes agree with the manifest's default
//! features, the guide's tonic recipe asks for the tonic minor the library is built against
//! and says where TLS comes from, and every relative link between them names a file that
//! exists. (Their Rust examples are compiled as doctests, see `ReadmeExamples` and `guide`
//! in the crate root.)

use std::collections::BTreeSet;

fn read(file: &str) -> String {
    let path = format!("{}/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The README and every page of the guide, each with its path from the crate root.
fn readme_and_guide() -> Vec<(String, String)> {
    let mut pages = vec![("README.md".to_owned(), read("README.md"))];
    let dir = format!("{}/docs/guide", env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("docs/guide: {e}"))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .collect();
    names.sort();
    for name in names {
        let path = format!("docs/guide/{name}");
        let text = read(&path);
        pages.push((path, text));
    }
    pages
}

/// The quoted names in a TOML array such as `["etcd", "tls"]`.
fn names_in(array: &str) -> BTreeSet<String> {
    array
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The manifest's features (a name and its definition per line of `[features]`), and the
/// default ones.
fn manifest_features() -> (BTreeSet<String>, BTreeSet<String>) {
    let manifest = read("Cargo.toml");
    let section = manifest
        .split("\n[features]\n")
        .nth(1)
        .expect("a [features] section")
        .split("\n[")
        .next()
        .unwrap();
    let (mut all, mut default) = (BTreeSet::new(), BTreeSet::new());
    for line in section.lines().filter(|l| !l.starts_with('#')) {
        let Some((name, definition)) = line.split_once(" = ") else {
            continue;
        };
        if name == "default" {
            default = names_in(definition);
        } else {
            all.insert(name.to_owned());
        }
    }
    (all, default)
}

#[test]
fn the_feature_table_and_every_default_the_readme_names_agree_with_the_manifest() {
    let readme = read("README.md");
    let (features, default) = manifest_features();
    assert!(default.contains("tls"), "{default:?}");
    // The table: `| `name` | on/off | what it adds |`.
    let mut table = BTreeSet::new();
    for row in readme.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`');
        if !features.contains(name) || !matches!(cells[2], "on" | "off") {
            continue;
        }
        let on = cells[2] == "on";
        assert_eq!(on, default.contains(name), "the table's row of {name}");
        table.insert(name.to_owned());
    }
    assert_eq!(table, features, "every feature has a row");
    // The prose: "feature `name`, on by default" and "(feature `name`, off by default)".
    let mut said = 0;
    for (path, text) in readme_and_guide() {
        said += defaults_said(&path, &text, &default);
    }
    assert!(said >= 1, "the Security page says the default of `tls`");
}

/// How many times `text` says "feature `name`, on/off by default", each checked against the
/// manifest's `default` features.
fn defaults_said(path: &str, text: &str, default: &BTreeSet<String>) -> usize {
    let mut said = 0;
    for (at, _) in text.match_indices("feature `") {
        let rest = &text[at + "feature `".len()..];
        let Some((name, after)) = rest.split_once('`') else {
            continue;
        };
        let words: String = after.chars().take(20).collect();
        for (state, on) in [("on by default", true), ("off by default", false)] {
            if words.starts_with(&format!(", {state}")) {
                said += 1;
                assert_eq!(
                    on,
                    default.contains(name),
                    "{path} calls feature {name} {state}"
                );
            }
        }
    }
    said
}

#[test]
fn the_tonic_recipe_asks_for_the_library_s_tonic_and_says_where_tls_comes_from() {
    let page = read("docs/guide/providers-and-consumers.md");
    let recipe = page
        .split("## Add it to a tonic service")
        .nth(1)
        .expect("the recipe")
        .split("\n## ")
        .next()
        .unwrap();
    let manifest = read("Cargo.toml");
    let ours = manifest
        .lines()
        .find(|l| l.starts_with("tonic = "))
        .expect("the library's tonic");
    let theirs = recipe
        .lines()
        .find(|l| l.starts_with("tonic = "))
        .expect("the recipe's tonic line");
    let version = |line: &str| line.split('"').nth(1).unwrap().to_owned();
    assert_eq!(version(theirs), version(ours));
    assert!(theirs.contains("tls"), "{theirs}");
    let tls = manifest
        .lines()
        .find(|l| l.starts_with("tls = "))
        .expect("the tls feature");
    assert!(tls.contains("\"tonic/tls-ring\""), "{tls}");
    assert!(
        recipe.contains("`tls-ring`"),
        "the recipe names tonic's feature"
    );
    let prose = recipe.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        prose.contains(r#"default-features = false, features = ["tls"]"#),
        "the recipe says how to keep TLS without the other defaults"
    );
}

#[test]
fn every_relative_link_of_the_readme_and_the_guide_names_a_file_that_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for (path, text) in readme_and_guide() {
        let dir = root.join(&path);
        let dir = dir.parent().unwrap();
        for (at, _) in text.match_indices("](") {
            let rest = &text[at + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = &rest[..end];
            if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
                continue;
            }
            let file = target.split('#').next().unwrap();
            assert!(
                dir.join(file).exists(),
                "{path} links to {target}, which does not exist"
            );
            checked += 1;
        }
    }
    assert!(checked >= 10, "the README links every guide page");
}
