//! What the live subscriptions of one resolver see, as its consumer record lists them:
//! each subscription's task writes its entry after a push, each balanced channel reports
//! the rules it routes by (see `rules`), the record task reads them all.

use std::collections::BTreeMap;
use std::sync::Mutex;

use tokio::sync::watch;

use crate::consumer::subscription::Subscription;
use crate::governance::migration::{LevelChoice, StepSource};
use crate::model::ConsumedService;

/// What one balanced channel routes by: the digest of its rules in force and their keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RulesSeen {
    pub digest: String,
    pub keys: Vec<String>,
}

/// One channel's last report, stamped so that the newest one wins.
struct Report {
    stamp: u64,
    rules: RulesSeen,
}

#[derive(Default)]
struct Tables {
    services: BTreeMap<u64, ConsumedService>,
    /// Per subscription, per channel: what each live channel last reported.
    rules: BTreeMap<u64, BTreeMap<u64, Report>>,
    /// The stamp of the next report.
    stamp: u64,
    /// The id of the next channel.
    next_channel: u64,
}

impl Tables {
    /// What subscription `id`'s channels route by: the newest report of a live one.
    fn rules_of(&self, id: u64) -> Option<&RulesSeen> {
        self.rules
            .get(&id)?
            .values()
            .max_by_key(|report| report.stamp)
            .map(|report| &report.rules)
    }
}

/// See the module docs. Its version moves on every change that the record shows.
pub(crate) struct Seen {
    entries: Mutex<Tables>,
    version: watch::Sender<u64>,
}

impl Default for Seen {
    fn default() -> Self {
        Seen {
            entries: Mutex::new(Tables::default()),
            version: watch::channel(0).0,
        }
    }
}

impl Seen {
    /// Sets what subscription `id` holds: its endpoint digest, their number and the
    /// registry position it has seen, at wall-clock `now_ms`. The digest's time moves only
    /// when the digest changes; the version only when something the record shows changed.
    pub fn update(
        &self,
        id: u64,
        subscription: &Subscription,
        digest: String,
        endpoints: u64,
        position: i64,
        now_ms: u64,
    ) {
        let mut tables = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let entries = &mut tables.services;
        let changed = match entries.get_mut(&id) {
            Some(known) => {
                let changed = known.digest != digest
                    || known.endpoints != endpoints
                    || known.position != position;
                if known.digest != digest {
                    known.changed_ms = now_ms;
                }
                known.digest = digest;
                known.endpoints = endpoints;
                known.position = position;
                changed
            }
            None => {
                let qualifier = |q: &Option<String>| q.clone().unwrap_or_default();
                entries.insert(
                    id,
                    ConsumedService {
                        interface: subscription.interface.clone(),
                        group: qualifier(&subscription.group),
                        version: qualifier(&subscription.version),
                        protocol: qualifier(&subscription.protocol),
                        digest,
                        endpoints,
                        position,
                        changed_ms: now_ms,
                        rules_digest: None,
                        rules: Vec::new(),
                        level: None,
                        step: None,
                        step_rule: None,
                    },
                );
                true
            }
        };
        drop(tables);
        if changed {
            self.version.send_modify(|v| *v += 1);
        }
    }

    /// Sets which level subscription `id`'s set comes from, and the step in force (see
    /// [`LevelChoice`]); the version moves when that changed. Nothing before the
    /// subscription's first [`update`](Self::update).
    pub fn set_level(&self, id: u64, choice: &LevelChoice) {
        let mut tables = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let Some(known) = tables.services.get_mut(&id) else {
            return;
        };
        let level = Some(choice.level.as_str().to_owned());
        let step = Some(choice.step.as_str().to_owned());
        let step_rule = match &choice.source {
            StepSource::Rule(key) => Some(key.clone()),
            StepSource::Own => None,
        };
        let changed = known.level != level || known.step != step || known.step_rule != step_rule;
        known.level = level;
        known.step = step;
        known.step_rule = step_rule;
        drop(tables);
        if changed {
            self.version.send_modify(|v| *v += 1);
        }
    }

    /// A new channel over subscription `id` will report its rules (see
    /// [`Seen::report_rules`]): its id among them.
    pub fn new_channel(&self) -> u64 {
        let mut tables = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        tables.next_channel += 1;
        tables.next_channel
    }

    /// Sets what `channel` over subscription `id` routes by (`None`: the channel is gone).
    /// The subscription shows the newest report of its live channels; the version moves
    /// when that changes.
    pub fn report_rules(&self, id: u64, channel: u64, rules: Option<RulesSeen>) {
        let mut tables = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let before = tables.rules_of(id).cloned();
        match rules {
            Some(rules) => {
                tables.stamp += 1;
                let stamp = tables.stamp;
                let reports = tables.rules.entry(id).or_default();
                match reports.get_mut(&channel) {
                    // The same again: it stays as new as it was.
                    Some(known) if known.rules == rules => {}
                    _ => {
                        reports.insert(channel, Report { stamp, rules });
                    }
                }
            }
            None => {
                if let Some(reports) = tables.rules.get_mut(&id) {
                    reports.remove(&channel);
                    if reports.is_empty() {
                        tables.rules.remove(&id);
                    }
                }
            }
        }
        let changed = tables.rules_of(id) != before.as_ref() && tables.services.contains_key(&id);
        drop(tables);
        if changed {
            self.version.send_modify(|v| *v += 1);
        }
    }

    /// Subscription `id` ended.
    pub fn remove(&self, id: u64) {
        let removed = self
            .entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .services
            .remove(&id)
            .is_some();
        if removed {
            self.version.send_modify(|v| *v += 1);
        }
    }

    /// Every live subscription's entry, with what its channels route by, by interface,
    /// group, version and protocol.
    pub fn services(&self) -> Vec<ConsumedService> {
        let tables = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let mut services: Vec<ConsumedService> = tables
            .services
            .iter()
            .map(|(id, service)| {
                let mut service = service.clone();
                if let Some(rules) = tables.rules_of(*id) {
                    service.rules_digest = Some(rules.digest.clone());
                    service.rules = rules.keys.clone();
                }
                service
            })
            .collect();
        drop(tables);
        services.sort_by(|a, b| {
            (&a.interface, &a.group, &a.version, &a.protocol, &a.digest).cmp(&(
                &b.interface,
                &b.group,
                &b.version,
                &b.protocol,
                &b.digest,
            ))
        });
        services
    }

    /// A receiver that sees every change.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_the_record_shows_counts_as_a_change() {
        let seen = Seen::default();
        let mut changes = seen.changes();
        let s = Subscription::new("shop.OrderService").version("1.0");
        seen.update(1, &s, "aa".into(), 1, 5, 100);
        assert!(changes.has_changed().unwrap());
        changes.borrow_and_update();
        seen.update(1, &s, "aa".into(), 1, 5, 200);
        assert!(!changes.has_changed().unwrap());
        assert_eq!(seen.services()[0].changed_ms, 100);
        // A new position alone is a change, but the digest's time stays.
        seen.update(1, &s, "aa".into(), 1, 6, 300);
        assert!(changes.has_changed().unwrap());
        assert_eq!(seen.services()[0].changed_ms, 100);
        seen.update(1, &s, "bb".into(), 2, 6, 400);
        let services = seen.services();
        assert_eq!((services[0].changed_ms, services[0].endpoints), (400, 2));
        assert_eq!(services[0].version, "1.0");
        assert_eq!(services[0].group, "");
        changes.borrow_and_update();
        seen.remove(1);
        assert!(changes.has_changed().unwrap());
        assert!(seen.services().is_empty());
    }

    #[test]
    fn the_level_and_the_rule_it_comes_from_are_shown_once_changed() {
        use crate::governance::migration::{Level, MigrationStep};
        let seen = Seen::default();
        let s = Subscription::new("shop.OrderService");
        let choice = LevelChoice::initial(MigrationStep::ApplicationFirst);
        seen.set_level(1, &choice);
        assert!(
            seen.services().is_empty(),
            "nothing before the first update"
        );
        seen.update(1, &s, "aa".into(), 1, 5, 100);
        let mut changes = seen.changes();
        changes.borrow_and_update();
        seen.set_level(1, &choice);
        assert!(changes.has_changed().unwrap());
        changes.borrow_and_update();
        seen.set_level(1, &choice);
        assert!(
            !changes.has_changed().unwrap(),
            "the same again is no change"
        );
        let ruled = LevelChoice {
            level: Level::Interface,
            source: StepSource::Rule("shop-web.migration".into()),
            ..LevelChoice::initial(MigrationStep::ForceInterface)
        };
        seen.set_level(1, &ruled);
        assert!(changes.has_changed().unwrap());
        let shown = &seen.services()[0];
        assert_eq!(shown.level.as_deref(), Some("interface"));
        assert_eq!(shown.step.as_deref(), Some("FORCE_INTERFACE"));
        assert_eq!(shown.step_rule.as_deref(), Some("shop-web.migration"));
    }

    fn rules(digest: &str) -> Option<RulesSeen> {
        Some(RulesSeen {
            digest: digest.into(),
            keys: vec![format!("{digest}.condition-router")],
        })
    }

    #[test]
    fn a_subscription_shows_the_newest_rules_of_its_live_channels() {
        let seen = Seen::default();
        let s = Subscription::new("shop.OrderService");
        seen.update(1, &s, "aa".into(), 1, 5, 100);
        assert_eq!(seen.services()[0].rules_digest, None, "no channel: none");
        let mut changes = seen.changes();
        changes.borrow_and_update();
        let (one, two) = (seen.new_channel(), seen.new_channel());
        assert_ne!(one, two);
        seen.report_rules(1, one, rules("11"));
        assert!(changes.has_changed().unwrap());
        changes.borrow_and_update();
        let shown = &seen.services()[0];
        assert_eq!(shown.rules_digest.as_deref(), Some("11"));
        assert_eq!(shown.rules, ["11.condition-router"]);
        // A second channel's newer report wins; the same report again changes nothing.
        seen.report_rules(1, two, rules("22"));
        assert_eq!(seen.services()[0].rules_digest.as_deref(), Some("22"));
        changes.borrow_and_update();
        seen.report_rules(1, two, rules("22"));
        seen.report_rules(1, one, rules("11"));
        assert!(!changes.has_changed().unwrap());
        assert_eq!(seen.services()[0].rules_digest.as_deref(), Some("22"));
        // The newer channel goes: the other's report shows; the last goes: none.
        seen.report_rules(1, two, None);
        assert!(changes.has_changed().unwrap());
        assert_eq!(seen.services()[0].rules_digest.as_deref(), Some("11"));
        seen.report_rules(1, one, None);
        assert_eq!(seen.services()[0].rules_digest, None);
        assert!(seen.services()[0].rules.is_empty());
        // A report for a subscription not (or no longer) listed moves nothing, and is
        // shown once it is listed.
        changes.borrow_and_update();
        seen.report_rules(2, one, rules("33"));
        assert!(!changes.has_changed().unwrap());
        seen.update(2, &s, "bb".into(), 1, 5, 100);
        let shown = seen.services();
        assert_eq!(shown.len(), 2);
        assert!(
            shown
                .iter()
                .any(|s| s.rules_digest.as_deref() == Some("33"))
        );
        seen.report_rules(2, one, None);
        assert!(
            seen.entries.lock().unwrap().rules.is_empty(),
            "nothing kept"
        );
    }
}
