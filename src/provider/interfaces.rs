//! The interface-level URLs of a provider registering with [`RegisterMode::Interface`] or
//! [`RegisterMode::All`]: one per exported service (its parameters as the provider's rules
//! leave them, see [`ProviderUrl::for_service`]), written under the instance's registration
//! and kept in step with the exports: a new service gets its URL, a gone one loses it, a
//! changed one (a rule's `disabled=true` or `weight`, as Java's re-export writes them) is
//! rewritten. The graceful stop removes them first, before the drain.
//!
//! [`RegisterMode::Interface`]: super::RegisterMode::Interface
//! [`RegisterMode::All`]: super::RegisterMode::All

use std::collections::BTreeMap;

use super::{Shared, State};
use crate::error::Result;
use crate::model::{MetadataInfo, ProviderUrl};

/// The interface-level URL of every exported service of `current` at `host` (instance port
/// `port`), exported at `started_at_ms`, by [`ProviderUrl::key`]. Fails on a service whose
/// parameters cannot be written.
pub(super) fn urls(
    current: &MetadataInfo,
    host: &str,
    port: u16,
    started_at_ms: u64,
) -> Result<BTreeMap<String, ProviderUrl>> {
    let mut urls = BTreeMap::new();
    for service in current.services.values() {
        if let Some(url) =
            ProviderUrl::for_service(&current.app, host, port, service, started_at_ms)?
        {
            urls.insert(url.key(), url);
        }
    }
    Ok(urls)
}

impl Shared {
    /// Writes, rewrites and removes the interface-level URLs so that they are the current
    /// exports', under the registration in `state`. Every URL is tried; the first failure
    /// is returned, and the URLs are tried again at the next keep-alive.
    pub(super) async fn sync_interfaces(&self, state: &mut State) -> Result<()> {
        if !self.register_mode.writes_interface() || state.stopping || state.stopped {
            return Ok(());
        }
        let Some(registration) = state.registration.clone() else {
            return Ok(());
        };
        state.interfaces_pending = true;
        let wanted = urls(
            &self.exported.current(),
            &state.instance.host,
            state.instance.port,
            state.started_at_ms,
        )?;
        let mut first_error = None;
        let gone: Vec<String> = state
            .interfaces
            .keys()
            .filter(|key| !wanted.contains_key(*key))
            .cloned()
            .collect();
        for key in gone {
            if let Some((_, written)) = state.interfaces.get(&key) {
                match written.deregister().await {
                    Ok(()) => {
                        tracing::info!(url = %key, "interface-level URL removed");
                        state.interfaces.remove(&key);
                    }
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
        for (key, url) in wanted {
            let result = match state.interfaces.get(&key) {
                Some((old, _)) if *old == url => continue,
                Some((_, written)) => written.update(&url).await.map(|()| written.clone()),
                None => registration.register_interface(&url, &self.limits).await,
            };
            match result {
                Ok(written) => {
                    tracing::info!(url = %url.to_full_string(), at = %written.id(), "interface-level URL written");
                    state.interfaces.insert(key, (url, written));
                }
                Err(e) => {
                    if let Some(suppressed) = self.warn_allowed("interface-level URL not written") {
                        tracing::warn!(url = %key, error = %e, suppressed, "interface-level URL not written; will retry");
                    }
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => {
                state.interfaces_pending = false;
                Ok(())
            }
        }
    }

    /// Removes every interface-level URL (the start of a graceful stop): interface-level
    /// consumers know no stopping marker, so they must see the URLs go while the server
    /// still answers.
    pub(super) async fn withdraw_interfaces(&self, state: &mut State) {
        for (key, (_, written)) in std::mem::take(&mut state.interfaces) {
            match written.deregister().await {
                Ok(()) => tracing::info!(url = %key, "interface-level URL removed"),
                Err(e) => tracing::warn!(
                    url = %key,
                    error = %e,
                    "interface-level URL not removed: it stays until the liveness ends"
                ),
            }
        }
        state.interfaces_pending = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ServiceInfo;

    #[test]
    fn one_url_per_exported_service_with_a_protocol() {
        let current = MetadataInfo::new(
            "shop",
            [
                ServiceInfo::new("a.A"),
                ServiceInfo::new("a.A").with_version("2"),
                ServiceInfo::new("b.B")
                    .with_protocol("grpc")
                    .with_port(7001),
                ServiceInfo::new("c.C").with_param("disabled", "true"),
            ],
        )
        .unwrap();
        let urls = urls(&current, "10.0.0.7", 50051, 1).unwrap();
        let keys: Vec<&str> = urls.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["grpc://b.B::", "tri://a.A:2:", "tri://a.A::", "tri://c.C::"]
        );
        assert_eq!(urls["grpc://b.B::"].port, 7001);
        assert_eq!(urls["tri://c.C::"].params["disabled"], "true");
        assert_eq!(urls["tri://a.A::"].params["application"], "shop");
    }
}
