//! Applying configurator documents to a provider URL, on the consumer's side (what a
//! consumer sees of a provider) and on the provider's own.

use std::collections::BTreeMap;

use super::document::Configurators;
use super::matching::Target;
use crate::governance::facts::ProviderFacts;

impl Configurators {
    /// The consumer-side items that apply to `provider` for a consumer (`consumer_app`, its
    /// own `consumer_host`), applied in order to a copy of its params; `None` when none
    /// applies (no copy).
    pub fn apply_for_consumer(
        &self,
        consumer_app: &str,
        consumer_host: &str,
        provider: &ProviderFacts<'_>,
    ) -> Option<BTreeMap<String, String>> {
        configure_for_consumer(&[self], consumer_app, consumer_host, provider)
    }

    /// The provider-side items that apply to a provider itself (its `app`, `host`, `port`,
    /// `interface`), applied to `params`; whether any applied.
    pub fn apply_for_provider(
        &self,
        app: &str,
        host: &str,
        port: u16,
        interface: &str,
        params: &mut BTreeMap<String, String>,
    ) -> bool {
        configure_for_provider(&[self], app, host, port, interface, params)
    }

    /// Applies the items that match `target` to `working`, a copy of `target.params` made
    /// when the first one applies; later items see the parameters set by earlier ones.
    fn configure(&self, target: &Target<'_>, working: &mut Option<BTreeMap<String, String>>) {
        for item in &self.items {
            let current = working.as_ref().unwrap_or(target.params);
            let Some(changes) = item.changes_for(&Target {
                params: current,
                ..*target
            }) else {
                continue;
            };
            let keep_empty = target.side == "provider";
            let params = working.get_or_insert_with(|| target.params.clone());
            for (k, v) in changes {
                // Java's `AbsentConfigurator`: only what the URL lacks.
                if item.absent && params.contains_key(&k) {
                    continue;
                }
                if keep_empty || !v.is_empty() {
                    params.insert(k, v);
                }
            }
        }
    }
}

/// Applies the consumer-side items of `documents` in order (Java: the consumer app's
/// `{app}.configurators`, then the reference's service document) to a copy of `provider`'s
/// params; `None` when no item applies.
pub fn configure_for_consumer(
    documents: &[&Configurators],
    consumer_app: &str,
    consumer_host: &str,
    provider: &ProviderFacts<'_>,
) -> Option<BTreeMap<String, String>> {
    let target = Target {
        match_host: consumer_host,
        host: provider.host,
        port: provider.port,
        side: "consumer",
        app: consumer_app,
        interface: provider.interface,
        params: provider.params,
    };
    let mut working = None;
    for doc in documents {
        doc.configure(&target, &mut working);
    }
    working
}

/// Applies the provider-side items of `documents` in order (Java: the provider app's
/// document, then the service's) to `params` of a provider (`app`, `host`, `port`,
/// `interface`); whether any applied.
pub fn configure_for_provider(
    documents: &[&Configurators],
    app: &str,
    host: &str,
    port: u16,
    interface: &str,
    params: &mut BTreeMap<String, String>,
) -> bool {
    let mut working = None;
    {
        let target = Target {
            match_host: host,
            host,
            port,
            side: "provider",
            app,
            interface,
            params,
        };
        for doc in documents {
            doc.configure(&target, &mut working);
        }
    }
    match working {
        Some(w) => {
            *params = w;
            true
        }
        None => false,
    }
}
