//! The README says what the crate does: its feature table and every "on/off by default" it
//! writes agree with the manifest's default features, and the tonic recipe asks for the
//! tonic minor the library is built against and says where TLS comes from. (Its Rust
//! examples are compiled as doctests, see `ReadmeExamples` in the crate root.)

use std::collections::BTreeSet;

fn read(file: &str) -> String {
    let path = format!("{}/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"))
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
    for (at, _) in readme.match_indices("feature `") {
        let rest = &readme[at + "feature `".len()..];
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
                    "the README calls feature {name} {state}"
                );
            }
        }
    }
    assert!(said >= 1, "the Security section says the default of `tls`");
}

#[test]
fn the_tonic_recipe_asks_for_the_library_s_tonic_and_says_where_tls_comes_from() {
    let readme = read("README.md");
    let recipe = readme
        .split("### Add it to a tonic service")
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
