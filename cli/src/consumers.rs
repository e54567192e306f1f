//! `introspect consumers INTERFACE`: the consumers whose records say they subscribe to an
//! interface, each subscription compared with the tool's own digest of what the registry
//! holds for it now (see [`introspect::consumer::endpoint_digest`]), and with the tool's
//! own digest of the rules the config centre holds now for that consumer's app (see
//! [`introspect::governance::rules_digest`]): who still routes by an older rule
//! set.

use std::collections::{BTreeMap, BTreeSet};

use introspect::backend::ConsumerList;
use introspect::consumer::{Resolver, Subscription, endpoint_digest};
use introspect::model::{ConsumedService, ConsumerRecord};

/// One consumer's subscription to the interface, with the tool's verdict.
#[derive(Clone, Debug)]
pub struct ConsumerRow {
    /// The consumer's record (all its subscriptions).
    pub record: ConsumerRecord,
    /// The subscription to the interface.
    pub service: ConsumedService,
    /// The tool's digest of the same subscription, resolved now; `None` when it could not
    /// be resolved.
    pub current: Option<String>,
    /// The tool's rules digest of the same subscription for the consumer's app, read now;
    /// `None` when the rules could not be read.
    pub current_rules: Option<String>,
}

impl ConsumerRow {
    /// Whether the consumer's digest is the tool's: `Some(true)` same, `Some(false)`
    /// different, `None` unknown.
    pub fn same(&self) -> Option<bool> {
        self.current.as_ref().map(|d| *d == self.service.digest)
    }

    /// How the rules the consumer routes by compare with those written now.
    pub fn rules(&self) -> RulesVerdict {
        RulesVerdict::of(
            self.service.rules_digest.as_deref(),
            self.current_rules.as_deref(),
        )
    }
}

/// How the rules digest in a consumer's record compares with one computed from the
/// config centre now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RulesVerdict {
    /// The consumer routes by the rules written now.
    Same,
    /// It routes by another rule set: an older one (its record not rewritten since the
    /// last write, rules not read, or a bad rule written over a good one it keeps).
    Different,
    /// Either digest is missing: no balanced channel, a writer that predates rules
    /// digests, or rules that could not be read.
    Unknown,
}

impl RulesVerdict {
    /// Compares the record's `digest` with the `current` one.
    pub fn of(digest: Option<&str>, current: Option<&str>) -> RulesVerdict {
        match (digest, current) {
            (Some(digest), Some(current)) if digest == current => RulesVerdict::Same,
            (Some(_), Some(_)) => RulesVerdict::Different,
            _ => RulesVerdict::Unknown,
        }
    }

    /// `same`, `different` or `unknown`.
    pub fn name(self) -> &'static str {
        match self {
            RulesVerdict::Same => "same",
            RulesVerdict::Different => "different",
            RulesVerdict::Unknown => "unknown",
        }
    }
}

/// The rules digest a channel of `service` in a consumer of `app` would report, from what
/// the config centre holds now, with providers of `apps`; `None` when it cannot be read.
pub async fn current_rules(
    resolver: &Resolver,
    app: &str,
    service: &ConsumedService,
    apps: &BTreeSet<String>,
) -> Option<String> {
    let subscription = subscription_of(service);
    let read = resolver
        .rules_now(app, &subscription, apps.iter().map(String::as_str))
        .await;
    match read {
        Ok(rules) => Some(rules.digest()),
        Err(error) => {
            tracing::debug!(interface = %service.interface.escape_debug(), %error, "rules not read");
            None
        }
    }
}

/// What the command shows: the rows, and the records that could not be read.
#[derive(Clone, Debug, Default)]
pub struct ConsumersReport {
    /// The interface asked for.
    pub interface: String,
    /// One row per consumer subscription to it, by app, host and id.
    pub rows: Vec<ConsumerRow>,
    /// Records skipped: where, and why.
    pub skipped: Vec<(String, String)>,
    /// Whether the registry held more records than were read.
    pub truncated: bool,
}

/// The subscription a consumer's entry describes.
pub fn subscription_of(service: &ConsumedService) -> Subscription {
    subscription_for(
        &service.interface,
        &service.group,
        &service.version,
        &service.protocol,
    )
}

/// The subscription to `interface` with a record's qualifiers (empty: any), at the
/// application level.
pub fn subscription_for(
    interface: &str,
    group: &str,
    version: &str,
    protocol: &str,
) -> Subscription {
    let some = |q: &str| (!q.is_empty()).then(|| q.to_owned());
    let mut s = Subscription::new(interface);
    s.group = some(group);
    s.version = some(version);
    s.protocol = some(protocol);
    // The application level: what a record's digest at that level is compared with (the
    // interface level is read apart where a record says it is on it).
    s.migration = Some(introspect::MigrationStep::ForceApplication);
    s
}

/// A subscription's group, version and protocol.
type Qualifiers = (String, String, String);

/// Reads every consumer record and compares each subscription to `interface` with the
/// tool's own digest of it (one resolve per distinct group, version and protocol).
pub async fn gather(resolver: &Resolver, interface: &str) -> introspect::Result<ConsumersReport> {
    introspect::model::names::validate_interface(interface)?;
    let ConsumerList {
        records,
        skipped,
        truncated,
    } = resolver.consumers().await?;
    let mut digests: BTreeMap<Qualifiers, (Option<String>, BTreeSet<String>)> = BTreeMap::new();
    let mut rules: BTreeMap<(String, String, String, String), Option<String>> = BTreeMap::new();
    let mut rows = Vec::new();
    for record in records {
        for service in record
            .subscriptions
            .iter()
            .filter(|s| s.interface == interface)
        {
            let key = (
                service.group.clone(),
                service.version.clone(),
                service.protocol.clone(),
            );
            if !digests.contains_key(&key) {
                let resolved = resolver.resolve(&subscription_of(service)).await;
                let apps = resolved.as_ref().map_or_else(
                    |_| BTreeSet::new(),
                    |e| e.iter().map(|e| e.app.to_string()).collect(),
                );
                let digest = resolved.ok().map(|e| endpoint_digest(&e));
                digests.insert(key.clone(), (digest, apps));
            }
            let (current, apps) = &digests[&key];
            let rules_key = (
                key.0.clone(),
                key.1.clone(),
                key.2.clone(),
                record.app.clone(),
            );
            if !rules.contains_key(&rules_key) {
                let digest = match current {
                    Some(_) => current_rules(resolver, &record.app, service, apps).await,
                    None => None,
                };
                rules.insert(rules_key.clone(), digest);
            }
            rows.push(ConsumerRow {
                record: record.clone(),
                service: service.clone(),
                current: current.clone(),
                current_rules: rules[&rules_key].clone(),
            });
        }
    }
    rows.sort_by(|a, b| {
        (&a.record.app, &a.record.host, &a.record.id).cmp(&(
            &b.record.app,
            &b.record.host,
            &b.record.id,
        ))
    });
    Ok(ConsumersReport {
        interface: interface.to_owned(),
        rows,
        skipped,
        truncated,
    })
}

/// `1h02m`, `3m05s`, `42s`: how long ago `since_ms` was, at `now_ms`.
pub fn age(since_ms: u64, now_ms: u64) -> String {
    let secs = now_ms.saturating_sub(since_ms) / 1000;
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        3600..86_400 => format!("{}h{:02}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d{:02}h", secs / 86_400, secs % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_compare_only_when_both_digests_are_known() {
        assert_eq!(RulesVerdict::of(Some("aa"), Some("aa")), RulesVerdict::Same);
        assert_eq!(
            RulesVerdict::of(Some("aa"), Some("bb")),
            RulesVerdict::Different
        );
        assert_eq!(RulesVerdict::of(None, Some("bb")), RulesVerdict::Unknown);
        assert_eq!(RulesVerdict::of(Some("aa"), None).name(), "unknown");
        assert_eq!(RulesVerdict::Different.name(), "different");
    }

    #[test]
    fn ages_read_at_a_glance() {
        assert_eq!(age(0, 42_000), "42s");
        assert_eq!(age(0, 185_000), "3m05s");
        assert_eq!(age(0, 3_720_000), "1h02m");
        assert_eq!(age(0, 90_000_000), "1d01h");
        assert_eq!(age(5_000, 1_000), "0s");
    }
}
