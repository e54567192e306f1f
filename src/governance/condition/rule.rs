//! A condition rule document, as Dubbo's admins write it under `{key}.condition-router`
//! and Java 3.3 reads it (`ConditionRuleParser`, `ConditionRouterRule`,
//! `MultiDestConditionRouterRule`, `AbstractRouterRule`).

use std::collections::{BTreeMap, BTreeSet};

use serde_yaml_ng::{Mapping, Value};

use super::grammar::Condition;
use super::item::ConditionItem;
use super::route::{self, ConditionRoute, Step};
use super::term::Source;
use super::v31::MultiDest;
use crate::error::{Error, Result};
use crate::governance::rule_header::{Governed, RuleForm, RuleHeader, above_v31};
use crate::governance::rule_yaml::{field as get, scalar_text, short_kind as kind};
use crate::governance::{CallFacts, MAX_RULE_BYTES, ProviderFacts};

/// The form of a rule's conditions, from its `configVersion`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConditionVersion {
    /// `when => then` strings: `configVersion: v3.0`, none (as Java admin 0.6 writes), or
    /// any version below `v3.1` (`v2.7`, `v3`, `v3.0.x`).
    V30,
    /// `from`/`to` maps with weighted destinations: `configVersion: v3.1`.
    V31,
}

/// What of a call a rule reads, so a caller can cache routed subsets per distinct input:
/// calls equal in these (and the consumer) are routed alike. An xDS server reads the rest
/// to turn the rules into route matches: the values a `when` names exactly, and what it
/// cannot name exactly.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallReads {
    /// Whether some `when` reads the method called.
    pub method: bool,
    /// The attachments (request headers) some `when` reads, as named in the rule.
    pub attachments: BTreeSet<String>,
    /// The values `when` patterns name exactly (no `*`, no `~` range), by what they read:
    /// `method`, or an attachment's name. A call whose value is none of them is routed
    /// like any other such call, unless [`inexact`](Self::inexact) says otherwise.
    pub exact: BTreeMap<String, BTreeSet<String>>,
    /// The `when` terms on the call that are not a set of exact values (a glob, a range,
    /// an argument), as written: calls are not told apart by a list of values there.
    pub inexact: BTreeSet<String>,
    /// The keys of the consumer's own URL some `when` reads (`application`, `host`,
    /// `interface`, ...): what a rule decides per consumer.
    pub consumer: BTreeSet<String>,
}

impl CallReads {
    /// Notes the values `term` (on `read`) names: exact ones, or the term as inexact.
    fn note_values(&mut self, read: &str, term: &super::term::Term) {
        let patterns = term.matches.iter().chain(&term.mismatches);
        let mut exact = Vec::new();
        for pattern in patterns {
            if pattern.contains(['*', '~']) || pattern.starts_with('$') {
                self.inexact.insert(term.written());
                return;
            }
            exact.push(pattern.clone());
        }
        self.exact.entry(read.to_owned()).or_default().extend(exact);
    }

    /// Adds what `other` reads to this.
    pub(crate) fn merge(&mut self, other: CallReads) {
        self.method |= other.method;
        self.attachments.extend(other.attachments);
        for (read, values) in other.exact {
            self.exact.entry(read).or_default().extend(values);
        }
        self.inexact.extend(other.inexact);
        self.consumer.extend(other.consumer);
    }
}

/// A parsed condition rule: its settings and conditions, ready to route calls.
#[derive(Clone, Debug)]
pub struct ConditionRule {
    key: String,
    version: ConditionVersion,
    header: RuleHeader,
    body: Body,
}

/// The conditions, in order. A disabled v3.0 rule's are not parsed (Java does not parse
/// them either, so a malformed one does not make the rule fail).
#[derive(Clone, Debug)]
enum Body {
    V30(Vec<Condition>),
    V31(Vec<MultiDest>),
}

impl Body {
    /// The conditions of a rule of `version` (those of a disabled v3.0 rule not parsed).
    fn parse(map: &Mapping, version: ConditionVersion, enabled: bool) -> Result<Body, String> {
        let conditions = match get(map, "conditions") {
            Some(Value::Sequence(items)) if !items.is_empty() => items,
            Some(Value::Sequence(_)) | None => {
                return Err("no conditions: Java does not apply the rule".to_owned());
            }
            Some(other) => return Err(format!("conditions must be a list, not {}", kind(other))),
        };
        Ok(match version {
            ConditionVersion::V30 => {
                let mut parsed = Vec::new();
                for (i, item) in conditions.iter().enumerate() {
                    let Some(text) = scalar_text(item) else {
                        return Err(format!(
                            "condition {} must be a string, not {}",
                            i + 1,
                            kind(item)
                        ));
                    };
                    if enabled {
                        let c = Condition::parse(&text)
                            .map_err(|e| format!("condition {}: {e}", i + 1))?;
                        parsed.push(c);
                    }
                }
                Body::V30(parsed)
            }
            ConditionVersion::V31 => Body::V31(
                conditions
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        MultiDest::parse(item).map_err(|e| format!("condition {}: {e}", i + 1))
                    })
                    .collect::<Result<_, _>>()?,
            ),
        })
    }
}

impl Governed for ConditionRule {
    fn header(&self) -> &RuleHeader {
        &self.header
    }
}

/// The form of a rule's conditions from its `configVersion`, as Java's
/// `ConditionRuleParser.parse` reads it: `v3.1…` in any case is the `from`/`to` form; none
/// and any version below `v3.1` in `compareToIgnoreCase` order (`v2.7`, `v3`, `v3.0`,
/// `V3.0`, `v3.0.2`, a quoted `'3.0'`) the `when => then` form. Above `v3.1` (`v3.2`,
/// `v4`) Java refuses the rule and keeps the previous one, and so is it here.
fn condition_version(version: Option<&str>) -> Result<ConditionVersion, String> {
    match version {
        Some(v) if v.to_lowercase().starts_with("v3.1") => Ok(ConditionVersion::V31),
        Some(v) if above_v31(v) => Err(format!(
            "configVersion {:?} is above v3.1, which no Dubbo release defines; Java refuses \
             it too (write v3.0 or v3.1)",
            Error::shorten(v)
        )),
        _ => Ok(ConditionVersion::V30),
    }
}

impl ConditionRule {
    /// Parses a rule document (YAML) stored under `key`, as Java would accept it: a rule
    /// Java would refuse or not apply (unparsable, an unknown `configVersion`, no
    /// conditions, `valid: false`, a malformed condition, a field of the wrong type) is an
    /// [`Error::Rule`], so the previous rule stays in force, as in Java. Unknown fields are
    /// ignored.
    pub fn parse(key: &str, yaml: &str) -> Result<ConditionRule> {
        let refuse = |reason: String| Error::Rule {
            key: key.to_owned(),
            reason,
            source: None,
        };
        if yaml.len() > MAX_RULE_BYTES {
            return Err(refuse(format!(
                "{} bytes, over the limit of {MAX_RULE_BYTES}",
                yaml.len()
            )));
        }
        let value: Value = serde_yaml_ng::from_str(yaml)
            .map_err(|e| refuse(format!("not YAML: {e}")).caused_by(e))?;
        let Value::Mapping(map) = value else {
            return Err(refuse(format!(
                "a rule must be a map, not {}",
                kind(&value)
            )));
        };
        Self::from_map(key, &map)
    }

    fn from_map(key: &str, map: &Mapping) -> Result<ConditionRule> {
        let refuse = |reason: String| Error::Rule {
            key: key.to_owned(),
            reason,
            source: None,
        };
        let header = RuleHeader::read(key, map, RuleForm::ConditionRule)?;
        // The fields Java ignores, named in any refusal, where a typo is the likely cause.
        let refuse = |reason: String| match header.notes.as_slice() {
            [] => refuse(reason),
            notes => refuse(format!("{reason}; {}", notes.join("; "))),
        };
        let version = condition_version(header.config_version.as_deref()).map_err(refuse)?;
        if !header.valid {
            return Err(refuse(
                "valid is false: Java does not apply the rule".to_owned(),
            ));
        }
        let body = Body::parse(map, version, header.enabled).map_err(refuse)?;
        Ok(ConditionRule {
            key: key.to_owned(),
            version,
            header,
            body,
        })
    }

    /// The key the rule is stored under in the config centre (what errors name).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The form of its conditions.
    pub fn version(&self) -> ConditionVersion {
        self.version
    }

    /// Its conditions as written, in order, to show them; none for a disabled v3.0 rule,
    /// whose conditions are not read (as Java does not parse them).
    pub fn conditions(&self) -> Vec<ConditionItem<'_>> {
        match &self.body {
            Body::V30(conditions) => conditions.iter().map(ConditionItem::v30).collect(),
            Body::V31(conditions) => conditions.iter().map(ConditionItem::v31).collect(),
        }
    }

    /// What of a call the rule reads: whether the method, and which attachments (so the
    /// caller can cache routed subsets per distinct input). Nothing for a disabled rule.
    pub fn reads(&self) -> CallReads {
        let mut reads = CallReads::default();
        if !self.header.enabled {
            return reads;
        }
        for step in self.steps() {
            let when = match step {
                Step::V30(c) => &c.when,
                Step::V31(c) => &c.when,
            };
            for term in when {
                match &term.source {
                    Source::Param(key) if key == "method" || key == "methods" => {
                        reads.method = true;
                        reads.note_values("method", term);
                    }
                    Source::Attachment(Some(name)) => {
                        reads.attachments.insert(name.clone());
                        reads.note_values(name, term);
                    }
                    Source::Argument(Some(_)) => {
                        reads.inexact.insert(term.written());
                    }
                    Source::Param(key) if key != "address" => {
                        reads.consumer.insert(key.clone());
                    }
                    Source::Param(_) => {
                        reads.consumer.insert("host".to_owned());
                    }
                    Source::Attachment(None) | Source::Argument(None) => {}
                }
            }
        }
        reads
    }

    /// Routes the providers `input` (indices into `providers`) for `call`, each condition
    /// in turn on what the previous left, as Java chains them. An index of `input` outside
    /// `providers` matches no `then`.
    pub fn route(
        &self,
        call: &CallFacts<'_>,
        providers: &[ProviderFacts<'_>],
        input: &[usize],
    ) -> ConditionRoute {
        if !self.header.enabled {
            return ConditionRoute::Unchanged {
                why: "the rule is disabled".to_owned(),
            };
        }
        route::run(&self.steps(), self.header.force, call, providers, input)
    }

    fn steps(&self) -> Vec<Step<'_>> {
        match &self.body {
            Body::V30(conditions) => conditions.iter().map(Step::V30).collect(),
            Body::V31(conditions) => conditions.iter().map(Step::V31).collect(),
        }
    }
}
