//! The consumer audit: who consumes what, and which consumers see a stale or different set.
//!
//! Consumers that register a record (`ResolverBuilder::register_consumer`) write, per
//! subscription, the digest of the endpoint set they route to. Every few seconds the
//! console reads every record and compares each digest with its own: for each distinct
//! subscription it keeps a live subscription of its own ([`Resolver::subscribe`], on the
//! same shared views as its follows) and digests what that holds. A digest that differs
//! from the console's for longer than the records' own refresh can explain is **stale**:
//! that consumer routes to a set the registry no longer holds.
//!
//! Records also say, per subscription with a balanced channel, the rules digest of the
//! governance rules the channel routes by. Each round the console reads, once per
//! subscription and consumer app, the rules the config centre holds now for that app
//! ([`Resolver::rules_now`], with the apps its own subscription routes to), digests them as
//! the consumer's watcher would, and says whether the consumer routes by them: `same`,
//! `different` (an older rule set: its record not rewritten since the write, rules not
//! read, or a bad rule written over a good one it keeps) or `unknown` (no channel, an
//! earlier writer, rules that could not be read).
//!
//! Mid-migration, records say which level of discovery each subscription reads (`level`,
//! `step`, the migration rule it comes from). A subscription reading the interface level is
//! compared with the console's read of that level; and one whose application-level set is
//! empty while the interface level has callable providers is flagged `interface_only`: its
//! providers have not moved to application-level discovery yet (the work left of a
//! migration). Only such subscriptions cost an interface-level read a round.
//!
//! Memory stays bounded: at most [`MAX_AUDITED`] subscriptions are followed, the records
//! are those one [`Resolver::consumers`] read returns (bounded by the library), and rules
//! are read for at most [`MAX_AUDITED`] subscription and app pairs a round (the others
//! are `unknown`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use introspect::backend::ConsumerList;
use introspect::consumer::{MigrationStep, Resolver, SubscriptionHandle, endpoint_digest};
use introspect::governance::migration::Level;
use introspect::model::{ConsumedService, ConsumerRecord};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::consumers::{RulesVerdict, current_rules, subscription_for};

/// Distinct subscriptions the console follows for the audit at most; consumers of others
/// are listed with an unknown verdict.
pub const MAX_AUDITED: usize = 200;
/// How long a subscription of the console's own may take to its first set.
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a subscription of a consumer is compared by: interface, group, version, protocol.
pub type Key = (String, String, String, String);

/// The key of a consumer's subscription.
pub fn key_of(service: &ConsumedService) -> Key {
    (
        service.interface.clone(),
        service.group.clone(),
        service.version.clone(),
        service.protocol.clone(),
    )
}

/// How a consumer's digest compares with the console's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The same set.
    Same,
    /// A different set, for less than the stale bound: the consumer may not have written
    /// its record since the last change.
    Different(Duration),
    /// A different set for longer than the stale bound.
    Stale(Duration),
    /// The console has no digest of its own for it.
    Unknown,
}

impl Verdict {
    /// Compares `digest` with the console's `current` one; `since` is when the audit first
    /// saw them differ (set here when they start to, cleared when they agree).
    pub fn of(
        digest: &str,
        current: Option<&str>,
        since: &mut Option<Instant>,
        now: Instant,
        stale_after: Duration,
    ) -> Verdict {
        match current {
            None => {
                *since = None;
                Verdict::Unknown
            }
            Some(current) if current == digest => {
                *since = None;
                Verdict::Same
            }
            Some(_) => {
                let lasted = now - *since.get_or_insert(now);
                if lasted >= stale_after {
                    Verdict::Stale(lasted)
                } else {
                    Verdict::Different(lasted)
                }
            }
        }
    }

    /// `same`, `different`, `stale` or `unknown`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Same => "same",
            Verdict::Different(_) => "different",
            Verdict::Stale(_) => "stale",
            Verdict::Unknown => "unknown",
        }
    }

    /// How long the sets have differed (zero unless different or stale).
    pub fn lasted(self) -> Duration {
        match self {
            Verdict::Different(d) | Verdict::Stale(d) => d,
            _ => Duration::ZERO,
        }
    }
}

/// One consumer subscription as the audit last saw it.
#[derive(Clone, Debug)]
pub struct Audited {
    /// The consumer's record.
    pub record: Arc<ConsumerRecord>,
    /// Which of its subscriptions.
    pub service: ConsumedService,
    /// The console's digest of the same subscription.
    pub current: Option<String>,
    /// The apps the console's own subscription routes to.
    pub apps: Arc<BTreeSet<String>>,
    /// The comparison.
    pub verdict: Verdict,
    /// The console's rules digest of the same subscription for the consumer's app.
    pub current_rules: Option<String>,
    /// How the rules the consumer routes by compare with those written now.
    pub rules: RulesVerdict,
    /// Whether the subscription's providers are at the interface level only (the console's
    /// own application-level set is empty, the interface level has callable ones): the
    /// work left of a migration.
    pub interface_only: bool,
}

/// The console's own view of one subscription.
struct Own {
    handle: Option<SubscriptionHandle>,
}

impl Own {
    fn digest_and_apps(&self) -> (Option<String>, BTreeSet<String>) {
        match &self.handle {
            Some(handle) if handle.ended().is_none() => {
                let endpoints = handle.current();
                let apps = endpoints.iter().map(|e| e.app.to_string()).collect();
                (Some(endpoint_digest(&endpoints)), apps)
            }
            _ => (None, BTreeSet::new()),
        }
    }
}

/// The audit's state: the last round's rows and what it follows.
#[derive(Default)]
struct State {
    rows: Vec<Audited>,
    skipped: Vec<(String, String)>,
    truncated: bool,
    error: Option<String>,
    own: BTreeMap<Key, Own>,
    since: HashMap<(String, Key), Instant>,
}

/// The audit of every registered consumer; see the module docs.
pub struct Audit {
    stale_after: Duration,
    state: Mutex<State>,
}

impl Audit {
    /// An audit that calls a set stale once it has differed for `stale_after`.
    pub fn new(stale_after: Duration) -> Self {
        Audit {
            stale_after,
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The rows for which `keep` holds, the total of them, and the last round's error.
    pub fn rows(&self, keep: impl Fn(&Audited) -> bool, max: usize) -> Value {
        let state = self.lock();
        let kept: Vec<&Audited> = state.rows.iter().filter(|r| keep(r)).collect();
        let stale = kept
            .iter()
            .filter(|r| matches!(r.verdict, Verdict::Stale(_)))
            .count();
        let older_rules = kept
            .iter()
            .filter(|r| r.rules == RulesVerdict::Different)
            .count();
        let interface_only = kept.iter().filter(|r| r.interface_only).count();
        json!({
            "total": kept.len(),
            "stale": stale,
            "older_rules": older_rules,
            "interface_only": interface_only,
            "consumers": kept.iter().take(max).map(|r| row_json(r)).collect::<Vec<_>>(),
            "skipped": state.skipped.iter().map(|(at, why)| json!({"at": at, "reason": why})).collect::<Vec<_>>(),
            "truncated": state.truncated,
            "error": state.error,
        })
    }

    /// One round: reads every record, follows each distinct subscription (up to
    /// [`MAX_AUDITED`]), compares. Returns whether a verdict or the set of rows changed.
    pub async fn round(&self, resolver: &Resolver) -> bool {
        let list = match tokio::time::timeout(SUBSCRIBE_TIMEOUT, resolver.consumers()).await {
            Ok(Ok(list)) => list,
            Ok(Err(e)) => return self.failed(e.to_string()),
            Err(_) => return self.failed("reading the consumer records timed out".into()),
        };
        let ConsumerList {
            records,
            skipped,
            truncated,
        } = list;
        let records: Vec<Arc<ConsumerRecord>> = records.into_iter().map(Arc::new).collect();
        let keys: BTreeSet<Key> = records
            .iter()
            .flat_map(|r| r.subscriptions.iter().map(key_of))
            .take(MAX_AUDITED)
            .collect();
        // Follow what is new (outside the lock: a first set takes a while), drop the rest.
        let new: Vec<Key> = {
            let mut state = self.lock();
            state.own.retain(|k, _| keys.contains(k));
            keys.iter()
                .filter(|k| !state.own.contains_key(*k))
                .cloned()
                .collect()
        };
        for key in new {
            let subscription = subscription_for(&key.0, &key.1, &key.2, &key.3);
            let subscribed =
                tokio::time::timeout(SUBSCRIBE_TIMEOUT, resolver.subscribe(subscription)).await;
            let handle = match subscribed {
                Ok(Ok(handle)) => Some(handle),
                Ok(Err(error)) => {
                    tracing::warn!(interface = %key.0.escape_debug(), %error, "audit cannot follow");
                    None
                }
                Err(_) => None,
            };
            self.lock().own.insert(key, Own { handle });
        }
        let own: BTreeMap<Key, (Option<String>, Arc<BTreeSet<String>>)> = self
            .lock()
            .own
            .iter()
            .map(|(k, o)| {
                let (digest, apps) = o.digest_and_apps();
                (k.clone(), (digest, Arc::new(apps)))
            })
            .collect();
        // Outside the lock: reads of the config centre take a while.
        let rules = rules_now(resolver, &records, &own).await;
        let at_interface: BTreeSet<&Key> = records
            .iter()
            .flat_map(|r| r.subscriptions.iter())
            .filter(|s| s.level.as_deref() == Some(Level::Interface.as_str()))
            .filter_map(|s| own.get_key_value(&key_of(s)).map(|(k, _)| k))
            .collect();
        let interface = interface_digests(resolver, &own, &at_interface).await;
        let now = Instant::now();
        let mut state = self.lock();
        let mut since = std::mem::take(&mut state.since);
        let mut seen = HashMap::new();
        let mut rows = Vec::new();
        for record in &records {
            for service in &record.subscriptions {
                let key = key_of(service);
                let (own_digest, apps) = own
                    .get(&key)
                    .cloned()
                    .unwrap_or((None, Arc::new(BTreeSet::new())));
                let interface_digest = interface.get(&key).cloned();
                let interface_only =
                    own_digest.is_some() && apps.is_empty() && interface_digest.is_some();
                // A consumer on the interface level is compared with that level's set.
                let current = if service.level.as_deref() == Some(Level::Interface.as_str()) {
                    interface_digest
                } else {
                    own_digest
                };
                let id = (record.id.clone(), key);
                let mut first = since.remove(&id);
                let verdict = Verdict::of(
                    &service.digest,
                    current.as_deref(),
                    &mut first,
                    now,
                    self.stale_after,
                );
                if let Some(first) = first {
                    seen.insert(id.clone(), first);
                }
                let current_rules = rules
                    .get(&(id.1.clone(), record.app.clone()))
                    .cloned()
                    .flatten();
                let rules =
                    RulesVerdict::of(service.rules_digest.as_deref(), current_rules.as_deref());
                rows.push(Audited {
                    record: record.clone(),
                    service: service.clone(),
                    current,
                    apps,
                    verdict,
                    current_rules,
                    rules,
                    interface_only,
                });
            }
        }
        let changed = state.rows.len() != rows.len()
            || state.rows.iter().zip(&rows).any(|(a, b)| {
                a.record.id != b.record.id
                    || a.service != b.service
                    || a.current != b.current
                    || a.verdict.name() != b.verdict.name()
                    || a.current_rules != b.current_rules
                    || a.rules != b.rules
                    || a.interface_only != b.interface_only
            })
            || state.error.is_some();
        state.rows = rows;
        state.since = seen;
        state.skipped = skipped;
        state.truncated = truncated;
        state.error = None;
        changed
    }

    fn failed(&self, error: String) -> bool {
        let mut state = self.lock();
        let changed = state.error.as_ref() != Some(&error);
        state.error = Some(error);
        changed
    }
}

/// The rules digest of each subscription and consumer app of `records` (at most
/// [`MAX_AUDITED`] pairs), from what the config centre holds now, with the apps of the
/// console's own subscription; `None` where the console has no set of its own or the
/// rules cannot be read. Read at the same time, each bounded.
async fn rules_now(
    resolver: &Resolver,
    records: &[Arc<ConsumerRecord>],
    own: &BTreeMap<Key, (Option<String>, Arc<BTreeSet<String>>)>,
) -> HashMap<(Key, String), Option<String>> {
    let pairs: BTreeMap<(Key, String), &ConsumedService> = records
        .iter()
        .flat_map(|r| {
            r.subscriptions
                .iter()
                .map(|s| ((key_of(s), r.app.clone()), s))
        })
        .filter(|((key, _), _)| own.get(key).is_some_and(|(digest, _)| digest.is_some()))
        .take(MAX_AUDITED)
        .collect();
    let reads = pairs.iter().map(|((key, app), service)| async move {
        let apps = own
            .get(key)
            .map(|(_, apps)| apps.clone())
            .unwrap_or_default();
        let read = tokio::time::timeout(
            SUBSCRIBE_TIMEOUT,
            current_rules(resolver, app, service, &apps),
        );
        ((key.clone(), app.clone()), read.await.ok().flatten())
    });
    futures::future::join_all(reads).await.into_iter().collect()
}

/// The digest of the interface level's set (callable provider URLs) of the subscriptions
/// of `own` whose application-level set is empty (are their providers at the interface
/// level only?) and of those `at_interface` (a consumer reads that level: its digest is
/// compared with this one); only non-empty sets. Read at the same time, each bounded; so a
/// fleet done migrating costs no interface-level read, and a backend without that level
/// gives none.
async fn interface_digests(
    resolver: &Resolver,
    own: &BTreeMap<Key, (Option<String>, Arc<BTreeSet<String>>)>,
    at_interface: &BTreeSet<&Key>,
) -> BTreeMap<Key, String> {
    let wanted = own
        .iter()
        .filter(|(key, (digest, apps))| {
            at_interface.contains(key) || (digest.is_some() && apps.is_empty())
        })
        .map(|(key, _)| key);
    let reads = wanted.map(|key| async move {
        let mut subscription = subscription_for(&key.0, &key.1, &key.2, &key.3);
        subscription.migration = Some(MigrationStep::ForceInterface);
        let read = tokio::time::timeout(SUBSCRIBE_TIMEOUT, resolver.resolve(&subscription));
        match read.await {
            Ok(Ok(found)) if !found.is_empty() => Some((key.clone(), endpoint_digest(&found))),
            _ => None,
        }
    });
    futures::future::join_all(reads)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// One row as the API gives it.
fn row_json(row: &Audited) -> Value {
    let r = &row.record;
    let s = &row.service;
    json!({
        "app": r.app,
        "id": r.id,
        "host": r.host,
        "registered_ms": r.registered_ms,
        "interface": s.interface,
        "group": s.group,
        "version": s.version,
        "protocol": s.protocol,
        "digest": s.digest,
        "endpoints": s.endpoints,
        "position": s.position,
        "changed_ms": s.changed_ms,
        "current_digest": row.current,
        "routes_to": &*row.apps,
        "verdict": row.verdict.name(),
        "differs_for_ms": row.verdict.lasted().as_millis() as u64,
        "rules_digest": s.rules_digest,
        "rule_keys": s.rules,
        "current_rules_digest": row.current_rules,
        "rules": row.rules.name(),
        "level": s.level,
        "step": s.step,
        "step_rule": s.step_rule,
        "fallback": s.step.as_deref() == Some(MigrationStep::ApplicationFirst.as_str())
            && s.level.as_deref() == Some(Level::Interface.as_str()),
        "interface_only": row.interface_only,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_differing_longer_than_the_bound_is_stale_and_agreeing_clears_it() {
        let bound = Duration::from_secs(15);
        let mut since = None;
        let start = Instant::now();
        let same = Verdict::of("aa", Some("aa"), &mut since, start, bound);
        assert_eq!((same, since), (Verdict::Same, None));
        let at = |secs| start + Duration::from_secs(secs);
        assert_eq!(
            Verdict::of("aa", Some("bb"), &mut since, at(1), bound),
            Verdict::Different(Duration::ZERO)
        );
        assert_eq!(
            Verdict::of("aa", Some("bb"), &mut since, at(10), bound),
            Verdict::Different(Duration::from_secs(9))
        );
        let stale = Verdict::of("aa", Some("cc"), &mut since, at(16), bound);
        assert_eq!(stale, Verdict::Stale(Duration::from_secs(15)));
        assert_eq!(
            (stale.name(), stale.lasted()),
            ("stale", Duration::from_secs(15))
        );
        assert_eq!(
            Verdict::of("cc", Some("cc"), &mut since, at(17), bound),
            Verdict::Same
        );
        assert_eq!(since, None, "agreeing starts the count again");
        assert_eq!(
            Verdict::of("aa", None, &mut since, at(18), bound),
            Verdict::Unknown
        );
    }
}
