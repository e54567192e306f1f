//! `introspect consumers INTERFACE`: the consumers whose records say they subscribe to an
//! interface, each subscription compared with the tool's own digest of what the registry
//! holds for it now (see [`introspect::consumer::endpoint_digest`]).

use std::collections::BTreeMap;

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
}

impl ConsumerRow {
    /// Whether the consumer's digest is the tool's: `Some(true)` same, `Some(false)`
    /// different, `None` unknown.
    pub fn same(&self) -> Option<bool> {
        self.current.as_ref().map(|d| *d == self.service.digest)
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
    let some = |q: &str| (!q.is_empty()).then(|| q.to_owned());
    let mut s = Subscription::new(&service.interface);
    s.group = some(&service.group);
    s.version = some(&service.version);
    s.protocol = some(&service.protocol);
    s
}

/// Reads every consumer record and compares each subscription to `interface` with the
/// tool's own digest of it (one resolve per distinct group, version and protocol).
pub async fn gather(resolver: &Resolver, interface: &str) -> introspect::Result<ConsumersReport> {
    introspect::model::names::validate_interface(interface)?;
    let ConsumerList {
        records,
        skipped,
        truncated,
    } = resolver.consumers().await?;
    let mut digests: BTreeMap<(String, String, String), Option<String>> = BTreeMap::new();
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
                let digest = resolved.ok().map(|e| endpoint_digest(&e));
                digests.insert(key.clone(), digest);
            }
            rows.push(ConsumerRow {
                record: record.clone(),
                service: service.clone(),
                current: digests[&key].clone(),
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
    fn ages_read_at_a_glance() {
        assert_eq!(age(0, 42_000), "42s");
        assert_eq!(age(0, 185_000), "3m05s");
        assert_eq!(age(0, 3_720_000), "1h02m");
        assert_eq!(age(0, 90_000_000), "1d01h");
        assert_eq!(age(5_000, 1_000), "0s");
    }
}
