//! The rules in force for one channel: what the config centre holds for its service, its
//! providers' apps and its consumer's app, each parsed once when it changes. Pure: the
//! rules watcher (`consumer/rules`) builds it, the balancer routes by it.

use std::collections::{BTreeMap, BTreeSet};

use super::facts::{ConsumerIdentity, ProviderFacts};

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

/// What of a call the rules in force read, besides its tag: the key of cached routings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallReads {
    /// Whether a rule reads the method.
    pub method: bool,
    /// The attachments rules read, by lower-case name.
    pub attachments: BTreeSet<String>,
}

/// The rules in force, and those that are not. See the module docs.
#[derive(Clone, Debug, Default)]
pub struct RuleSet {
    /// Rules refused or not applied.
    pub problems: Vec<RuleProblem>,
}

impl RuleSet {
    /// No rules: routing by what providers publish alone.
    pub fn none() -> RuleSet {
        RuleSet::default()
    }

    /// What of a call the rules read.
    pub fn reads(&self) -> CallReads {
        CallReads::default()
    }

    /// `provider`'s parameters as the consumer-side configurators in force override them
    /// for `consumer`; `None` when none applies.
    pub fn configure(
        &self,
        consumer: &ConsumerIdentity,
        provider: &ProviderFacts<'_>,
    ) -> Option<BTreeMap<String, String>> {
        let _ = (consumer, provider);
        None
    }
}
