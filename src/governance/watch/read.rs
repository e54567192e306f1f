//! One read of the rules the config centre holds for a channel, parsed as the channel's
//! rules watcher parses them: what
//! [`Resolver::explain_route`](crate::Resolver::explain_route) routes by, and what a
//! console compares a consumer's rules digest with
//! ([`Resolver::rules_now`](crate::Resolver::rules_now)).
//!
//! A read of its own rather than the shared follows' state: it answers for keys no channel
//! follows, and says what the config centre holds now (a refused content with no rule in
//! its place), where a follow keeps the last good rule under it.

use std::sync::Arc;

use futures::future::join_all;

use crate::backend::config::{ConfigCentre, ConfigKey, DEFAULT_GROUP};
use crate::error::Error;
use crate::governance::{Rule, RuleKey, RuleProblem};

/// What one read found: the rules that parse, the keys refused (as the watcher refuses
/// them) and the keys that could not be read at all.
pub(crate) struct RulesRead {
    pub rules: Vec<(RuleKey, Rule)>,
    pub refused: Vec<RuleProblem>,
    pub unread: Vec<(String, Error)>,
}

/// Reads each of `keys` once, at the same time.
pub(crate) async fn read_rules(config: &Arc<dyn ConfigCentre>, keys: Vec<RuleKey>) -> RulesRead {
    let reads = join_all(keys.iter().map(|key| {
        let name = ConfigKey::new(key.key(), DEFAULT_GROUP);
        async move { config.get(&name?).await }
    }))
    .await;
    let mut read = RulesRead {
        rules: Vec::new(),
        refused: Vec::new(),
        unread: Vec::new(),
    };
    for (key, got) in keys.into_iter().zip(reads) {
        let name = key.key();
        match got {
            Ok(None) => {}
            Ok(Some(item)) => match Rule::parse(&key, &item.content) {
                Ok(rule) => read.rules.push((key, rule)),
                Err(error) => read.refused.push(RuleProblem {
                    key: name,
                    reason: error.to_string(),
                }),
            },
            // Oversized or otherwise refused by the config part: no rule, as the watcher.
            Err(error @ Error::Rule { .. }) => read.refused.push(RuleProblem {
                key: name,
                reason: error.to_string(),
            }),
            Err(error) => read.unread.push((name, error)),
        }
    }
    read
}
