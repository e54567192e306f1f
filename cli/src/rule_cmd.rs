//! `introspect rule get|put|delete|list|check`: the command-line side of
//! [`introspect_cli::rule`]: arguments, and what each subcommand prints.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use introspect::Error;
use introspect::backend::Backend;
use introspect::backend::config::{ConfigVersion, DEFAULT_GROUP};
use introspect_cli::rule::write::{self, Expect};
use introspect_cli::rule::{ParsedRule, RuleForm, check, file, form, placement, readers};
use serde_json::json;

use crate::output::Output;

/// The subcommands of `introspect rule`. A rule's key is the field `rule`: `key` is the
/// id of the global TLS flag `--key`.
#[derive(Subcommand, Clone, Debug)]
pub enum RuleCommand {
    /// Print a rule's text and its version (the version to give `put --expect`).
    Get {
        /// The rule's key, e.g. shop.tag-router, helloworld.Greeter::.condition-router.
        #[arg(value_name = "KEY")]
        rule: String,
        /// The config group.
        #[arg(long, default_value = DEFAULT_GROUP)]
        group: String,
    },
    /// Check a rule file as the rule its key names, then write it by compare-and-set.
    Put {
        /// The rule's key; its suffix says the form (.configurators, .tag-router,
        /// .condition-router; .migration in group DUBBO_SERVICEDISCOVERY_MIGRATION).
        #[arg(value_name = "KEY")]
        rule: String,
        /// The rule file (YAML, as dubbo-admin writes it).
        file: PathBuf,
        /// The config group.
        #[arg(long, default_value = DEFAULT_GROUP)]
        group: String,
        /// Write only if the rule is still at this version (from `rule get`).
        #[arg(long, value_name = "VERSION", conflicts_with = "create")]
        expect: Option<String>,
        /// Write only if there is no rule under the key yet.
        #[arg(long)]
        create: bool,
        /// Write a key of no known rule form, unchecked.
        #[arg(long)]
        force_unknown: bool,
        /// Write the rule under a key its document's key and scope do not name (no
        /// consumer or provider reads it there).
        #[arg(long)]
        force: bool,
    },
    /// Delete a rule by compare-and-delete.
    Delete {
        /// The rule's key.
        #[arg(value_name = "KEY")]
        rule: String,
        /// The config group.
        #[arg(long, default_value = DEFAULT_GROUP)]
        group: String,
        /// Delete only if the rule is still at this version (default: the one read first).
        #[arg(long, value_name = "VERSION")]
        expect: Option<String>,
    },
    /// The rule keys present in a group (not supported on Nacos).
    List {
        /// The config group.
        #[arg(long, default_value = DEFAULT_GROUP)]
        group: String,
    },
    /// Check a rule file offline (no registry) and show how it reads.
    Check {
        /// The rule file.
        file: PathBuf,
        /// The key it is meant for, whose suffix says its form (default: guessed from
        /// its fields). Check opens no registry, so `--key` names the rule here, not a TLS
        /// key file.
        // The id `key` is the global TLS flag's: this one takes its place in `rule check`
        // (clap propagates no global a subcommand defines), and a path holds any key.
        #[arg(long = "key", visible_alias = "rule-key", value_name = "KEY")]
        key: Option<PathBuf>,
    },
}

/// The error of a rule file that does not parse as the rule `key` names.
fn invalid(path: &Path, what: &str, error: Error) -> Error {
    let reason = match error {
        Error::Rule { reason, .. } => reason,
        other => other.to_string(),
    };
    Error::Rule {
        key: path.display().to_string(),
        reason: format!("not a valid {what}: {reason}"),
        source: None,
    }
}

/// Refuses a rule whose document names another key than `key` (nobody would read it),
/// unless `force`.
fn misplaced(key: &str, form: RuleForm, text: &str, force: bool) -> Result<(), Error> {
    match placement::check(key, form, text) {
        Err(reason) if !force => Err(Error::Rule {
            key: key.to_owned(),
            reason: format!("{reason} (pass --force to write it there anyway)"),
            source: None,
        }),
        _ => Ok(()),
    }
}

/// Warns when no known member reads `key` (rules are staged before deploys: never
/// refused for that alone), or when the registry could not be asked.
async fn warn_if_unread(backend: &Backend, key: &str) {
    let keys = [key.to_owned()];
    match readers::known(backend, &keys).await {
        Ok(known) => {
            if let Some(why) = placement::unread_why(key, &known) {
                eprintln!("warning: nobody reads {key} now: {why}");
            }
        }
        Err(error) => eprintln!(
            "warning: could not ask the registry who reads {key} ({error}); written \
             without that check"
        ),
    }
}

/// `rule check`: parses the file as the form `key` names (else the one its fields
/// suggest) and prints how it reads.
pub fn check(out: &Output, path: &Path, key: Option<&str>) -> Result<(), Error> {
    let text = file::read(path)?;
    let (form, key) = match key {
        Some(key) => {
            let form = RuleForm::of_key(key).ok_or_else(|| Error::Rule {
                key: key.to_owned(),
                reason: "not a rule key this tool checks (.configurators, .tag-router, \
                         .condition-router, .migration)"
                    .into(),
                source: None,
            })?;
            (form, key)
        }
        None => {
            let form = RuleForm::guess(&text).map_err(|reason| Error::Rule {
                key: path.display().to_string(),
                reason,
                source: None,
            })?;
            (form, form.sample_key())
        }
    };
    let what = format!("{} for {key}", form.name());
    let rule = ParsedRule::parse_checked(form, key, &text).map_err(|e| invalid(path, &what, e))?;
    if key != form.sample_key() {
        misplaced(key, form, &text, false)?;
    }
    let mut value = check::json(&rule);
    value["file"] = json!(path.display().to_string());
    value["ruleKey"] = json!(key);
    let text = format!("{}: a valid {what}\n{}", path.display(), check::text(&rule));
    out.show(value, &text)?;
    Ok(())
}

/// The subcommands that read or write the registry's config centre.
pub async fn run(out: &Output, backend: &Backend, command: &RuleCommand) -> Result<(), Error> {
    let config = &**backend.config();
    match command {
        RuleCommand::Get { rule: key, group } => {
            let item = write::get(config, key, group).await?;
            // What consumers and providers make of it: a rule they refuse keeps the last
            // good one in force where they run, and this says why.
            let refused = RuleForm::of_key(key)
                .and_then(|form| ParsedRule::parse_checked(form, key, &item.content).err())
                .map(|e| match e {
                    Error::Rule { reason, .. } => reason,
                    other => other.to_string(),
                });
            let value = json!({
                "key": key, "group": group,
                "version": item.version.as_str(), "content": item.content,
                "refused": refused,
            });
            // A YAML comment first: the output stays a rule file to edit and put back.
            let mut text = format!("# {group}/{key} version {}\n", item.version);
            if let Some(reason) = &refused {
                text.push_str(&format!(
                    "# refused by consumers and providers (they keep the last good rule): {}\n",
                    reason.replace('\n', " ")
                ));
            }
            text.push_str(&item.content);
            if !text.ends_with('\n') {
                text.push('\n');
            }
            out.show(value, &text)?;
        }
        RuleCommand::Put {
            rule: key,
            file: path,
            group,
            expect,
            create,
            force_unknown,
            force,
        } => {
            let text = file::read(path)?;
            let checked = form::check_for_write(key, group, &text, *force_unknown);
            let parsed = match checked {
                Ok(parsed) => parsed,
                Err(e @ Error::Rule { .. }) if RuleForm::of_key(key).is_some() => {
                    let what = RuleForm::of_key(key)
                        .map_or("rule", RuleForm::name)
                        .to_owned();
                    return Err(invalid(path, &format!("{what} for {key}"), e));
                }
                Err(e) => return Err(e),
            };
            if let Some(rule) = &parsed {
                misplaced(key, rule.form(), &text, *force)?;
            }
            if parsed.is_some()
                && group != DEFAULT_GROUP
                && !matches!(parsed, Some(ParsedRule::Migration(_)))
            {
                eprintln!(
                    "warning: consumers read routing rules in group {DEFAULT_GROUP}, not {group}"
                );
            }
            if let Some(ParsedRule::Tag(rule)) = &parsed
                && !rule.is_valid()
            {
                eprintln!("warning: the tag rule has no tags: consumers route as with no rule");
            }
            let expect = match (expect, create) {
                (Some(version), _) => Expect::Version(ConfigVersion::new(version.clone())),
                (None, true) => Expect::Absent,
                (None, false) => Expect::Current,
            };
            let version = write::put(config, key, group, &text, expect).await?;
            if parsed.is_some() {
                warn_if_unread(backend, key).await;
            }
            let value = json!({"key": key, "group": group, "version": version.as_str()});
            out.show(value, &format!("wrote {group}/{key}: version {version}\n"))?;
        }
        RuleCommand::Delete {
            rule: key,
            group,
            expect,
        } => {
            let expected = expect.clone().map(ConfigVersion::new);
            let version = write::delete(config, key, group, expected).await?;
            let value = json!({
                "key": key, "group": group, "version": version.as_str(), "deleted": true,
            });
            out.show(
                value,
                &format!("deleted {group}/{key} (version {version})\n"),
            )?;
        }
        RuleCommand::List { group } => {
            let keys = config.list(group).await?;
            let mut text: String = keys.iter().map(|k| format!("{k}\n")).collect();
            if keys.is_empty() {
                text = format!("no rules in group {group}\n");
            }
            let (line, unread) = readers::report(backend, Ok(keys.clone())).await;
            if let Some(line) = line {
                text.push_str(&line);
                text.push('\n');
            }
            let value = json!({"group": group, "keys": keys, "rules_nobody_reads": unread});
            out.show(value, &text)?;
        }
        RuleCommand::Check { file, key } => {
            let key = key.as_ref().map(|k| k.display().to_string());
            check(out, file, key.as_deref())?;
        }
    }
    Ok(())
}
