//! The rules in force for one channel: what the config centre holds for its service, its
//! providers' apps and its consumer's app, each parsed once when it changes. Pure: the
//! rules watcher (`consumer/rules`, following keys through `governance/watch`) builds it, the balancer routes by it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::condition::{CallReads, ConditionRule};
use super::configurator::{Configurators, configure_for_consumer};
use super::facts::{ConsumerIdentity, ProviderFacts};
use super::keys::RuleKey;
use super::rule_header::Governed;
use super::rules_digest::rules_digest;
use super::tag_rule::TagRule;
use crate::error::Result;

/// A rule that is not applied, and why: it was refused (does not parse, unknown version,
/// oversized; the previous good one under its key stays in force), or it is of a kind not
/// evaluated here (script and mesh rules).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleProblem {
    /// The rule's key in the config centre.
    pub key: String,
    /// Why it is not applied.
    pub reason: String,
}

/// One rule as parsed from its text.
#[derive(Clone, Debug)]
pub struct Rule {
    /// The text it was parsed from: two rules are the same when their texts are.
    source: Arc<str>,
    kind: RuleKind,
}

#[derive(Clone, Debug)]
enum RuleKind {
    Configurators(Arc<Configurators>),
    Tag(Arc<TagRule>),
    Conditions(Arc<ConditionRule>),
    /// A script or mesh rule: present, not applied.
    NotApplied,
}

impl PartialEq for Rule {
    fn eq(&self, other: &Rule) -> bool {
        self.source == other.source
    }
}

impl Rule {
    /// Parses `text`, the content of `key` (its role says which form it has).
    pub fn parse(key: &RuleKey, text: &str) -> Result<Rule> {
        let name = key.key();
        let kind = match key {
            RuleKey::ConsumerConfigurators(_) | RuleKey::ServiceConfigurators(_) => {
                RuleKind::Configurators(Arc::new(Configurators::parse(&name, text)?))
            }
            RuleKey::TagRule(_) => RuleKind::Tag(Arc::new(TagRule::parse(&name, text)?)),
            RuleKey::ServiceConditions(_)
            | RuleKey::ProviderAppConditions(_)
            | RuleKey::ConsumerAppConditions(_) => {
                RuleKind::Conditions(Arc::new(ConditionRule::parse(&name, text)?))
            }
            RuleKey::Script(_) | RuleKey::Mesh(_) => RuleKind::NotApplied,
        };
        Ok(Rule {
            source: Arc::from(text),
            kind,
        })
    }

    /// The text the rule was parsed from.
    pub fn source(&self) -> &str {
        &self.source
    }
}

/// The rules in force, and those that are not. See the module docs.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleSet {
    /// Whether the config centre has answered for the keys first followed (or the wait for
    /// it passed): calls wait for it, briefly, so a new channel's first calls obey the
    /// rules already written.
    loaded: bool,
    rules: BTreeMap<RuleKey, Rule>,
    problems: Vec<RuleProblem>,
    reads: CallReads,
}

impl Default for RuleSet {
    fn default() -> Self {
        RuleSet::none()
    }
}

impl RuleSet {
    /// No rules: routing by what providers publish alone.
    pub fn none() -> RuleSet {
        RuleSet {
            loaded: true,
            rules: BTreeMap::new(),
            problems: Vec::new(),
            reads: CallReads::default(),
        }
    }

    /// No rules yet, while the config centre's first answers are awaited.
    pub fn pending() -> RuleSet {
        RuleSet {
            loaded: false,
            ..RuleSet::none()
        }
    }

    /// The rules in force, by key, and the problems of the others.
    pub fn new(
        rules: impl IntoIterator<Item = (RuleKey, Rule)>,
        problems: Vec<RuleProblem>,
    ) -> RuleSet {
        let rules: BTreeMap<RuleKey, Rule> = rules.into_iter().collect();
        let mut problems = problems;
        let mut reads = CallReads::default();
        for (key, rule) in &rules {
            match &rule.kind {
                RuleKind::Conditions(conditions) => reads.merge(conditions.reads()),
                RuleKind::NotApplied => problems.push(RuleProblem {
                    key: key.key(),
                    reason: match key {
                        RuleKey::Mesh(_) => "mesh rules are not applied by this consumer",
                        _ => "script rules are not applied by this consumer",
                    }
                    .to_owned(),
                }),
                RuleKind::Configurators(_) | RuleKind::Tag(_) => {}
            }
        }
        reads.attachments = reads
            .attachments
            .into_iter()
            .map(|name| name.to_ascii_lowercase())
            .collect();
        let mut exact: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (read, values) in std::mem::take(&mut reads.exact) {
            let read = if read == "method" {
                read
            } else {
                read.to_ascii_lowercase()
            };
            exact.entry(read).or_default().extend(values);
        }
        reads.exact = exact;
        RuleSet {
            loaded: true,
            rules,
            problems,
            reads,
        }
    }

    /// Whether the first answers are in (see the field's docs).
    pub fn is_loaded(&self) -> bool {
        self.loaded
    }

    /// The keys of the rules in force, in Java's order of application.
    pub fn in_force(&self) -> impl Iterator<Item = String> + '_ {
        self.rules
            .iter()
            .filter(|(_, rule)| !matches!(rule.kind, RuleKind::NotApplied))
            .map(|(key, _)| key.key())
    }

    /// The [`rules_digest`](super::rules_digest()) of the rules in force, from their keys
    /// and texts: what a consumer's record says it routes by, and what a console computes
    /// from one read of the config centre to compare. Script and mesh rules, not applied,
    /// are left out; a rule refused under a key leaves the previous good one in force, and
    /// so in the digest.
    pub fn digest(&self) -> String {
        let keys: Vec<(String, &str)> = self
            .rules
            .iter()
            .filter(|(_, rule)| !matches!(rule.kind, RuleKind::NotApplied))
            .map(|(key, rule)| (key.key(), rule.source()))
            .collect();
        rules_digest(keys.iter().map(|(key, text)| (key.as_str(), *text)))
    }

    /// Rules refused or not applied.
    pub fn problems(&self) -> &[RuleProblem] {
        &self.problems
    }

    /// What was noticed in the rules in force that changes nothing Java would do (a field
    /// Java ignores and the one it likely means, a configurator item dropped alone), by
    /// key: an operator's likely mistakes, shown beside the routing.
    pub fn notes(&self) -> Vec<RuleProblem> {
        let mut notes = Vec::new();
        for (key, rule) in &self.rules {
            let noted: &[String] = match &rule.kind {
                RuleKind::Configurators(rule) => rule.notes(),
                RuleKind::Tag(rule) => rule.notes(),
                RuleKind::Conditions(rule) => rule.notes(),
                RuleKind::NotApplied => &[],
            };
            notes.extend(noted.iter().map(|note| RuleProblem {
                key: key.key(),
                reason: note.clone(),
            }));
        }
        notes
    }

    /// What of a call the rules read (the method, attachments by lower-case name).
    pub fn reads(&self) -> &CallReads {
        &self.reads
    }

    /// `provider`'s parameters as the consumer-side configurators in force override them
    /// for `consumer` (the consumer app's document, then the service's, as Java applies
    /// them); `None` when none applies.
    pub fn configure(
        &self,
        consumer: &ConsumerIdentity,
        provider: &ProviderFacts<'_>,
    ) -> Option<BTreeMap<String, String>> {
        let documents: Vec<&Configurators> = self
            .rules
            .values()
            .filter_map(|rule| match &rule.kind {
                RuleKind::Configurators(c) => Some(&**c),
                _ => None,
            })
            .collect();
        if documents.is_empty() {
            return None;
        }
        configure_for_consumer(&documents, &consumer.app, &consumer.host, provider)
    }

    /// Whether a configurator document is in force: then who the consumer is (its app,
    /// its host) may change how providers read, through items' `applications` and
    /// `addresses`.
    pub fn has_configurators(&self) -> bool {
        self.rules
            .values()
            .any(|rule| matches!(rule.kind, RuleKind::Configurators(_)))
    }

    /// The tag rule of the providers of `app`, if one is in force.
    pub fn tag_rule(&self, app: &str) -> Option<&TagRule> {
        match &self.rules.get(&RuleKey::TagRule(app.to_owned()))?.kind {
            RuleKind::Tag(rule) => Some(rule),
            _ => None,
        }
    }

    /// The condition rules in force, in Java's order: the service's, the providers'
    /// apps', the consumer app's.
    pub fn conditions(&self) -> impl Iterator<Item = (&RuleKey, &ConditionRule)> + '_ {
        self.rules
            .iter()
            .filter_map(|(key, rule)| match &rule.kind {
                RuleKind::Conditions(c) => Some((key, &**c)),
                _ => None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_covers_the_rules_in_force_by_key_and_text() {
        let service = RuleKey::ServiceConditions("helloworld.Greeter::".into());
        let text = "configVersion: v3.0\nscope: service\nkey: helloworld.Greeter\n\
                    enabled: true\nconditions:\n  - '=> port != 50051'\n";
        let rule = Rule::parse(&service, text).unwrap();
        let set = RuleSet::new([(service.clone(), rule.clone())], Vec::new());
        assert_eq!(
            set.digest(),
            rules_digest([("helloworld.Greeter::.condition-router", text)])
        );
        assert_eq!(RuleSet::none().digest(), rules_digest([]));
        assert_ne!(set.digest(), RuleSet::none().digest());
        // A script rule is present, not applied: not in the digest.
        let script = RuleKey::Script("greeter".into());
        let with_script = RuleSet::new(
            [
                (service, rule),
                (script.clone(), Rule::parse(&script, "anything").unwrap()),
            ],
            Vec::new(),
        );
        assert_eq!(with_script.digest(), set.digest());
        assert_eq!(with_script.in_force().count(), 1);
    }

    #[test]
    fn a_malformed_rule_does_not_parse() {
        let key = RuleKey::ServiceConditions("S::".into());
        assert!(Rule::parse(&key, "conditions: [unclosed").is_err());
    }
}
