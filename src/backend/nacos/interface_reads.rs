//! Reading interface-level provider URLs on Nacos, as Dubbo's `NacosRegistry` subscribes
//! to them: the instances of service `providers:{interface}:{version}:{group}` (empty slots
//! kept, `$` written as `___`) in the registry's group; only enabled ones count (Dubbo
//! drops the others). Each instance is read with [`ProviderUrl::from_nacos`]; one that does
//! not read is skipped with its reason.
//!
//! Following subscribes to the service, then lists it from the server; each notification
//! of the SDK reads the SDK's cache (the newest push) again, as the app follow does (see
//! `follow`). The follow ends with an `Err` when reading the cache fails.

use std::sync::Arc;

use nacos_sdk::api::naming::ServiceInstance as NacosInstance;
use tokio::sync::mpsc;

use super::client::{Reader, map_error};
use super::names;
use super::subscription::Subscription;
use crate::backend::follow::forward;
use crate::backend::{InterfaceKey, ProviderUrlFollow, ProviderUrls};
use crate::error::Result;
use crate::model::ProviderUrl;
use crate::model::provider_url::PROVIDERS_CATEGORY;

/// The naming service of `key`, as the SDK is asked for it.
pub(super) fn service_of(key: &InterfaceKey) -> String {
    names::service_name(&format!(
        "{PROVIDERS_CATEGORY}:{}:{}:{}",
        key.interface, key.version, key.group
    ))
}

/// The URLs of the enabled instances in `listed`.
pub(super) fn read(listed: &[NacosInstance]) -> ProviderUrls {
    let mut urls = ProviderUrls::default();
    for instance in listed.iter().filter(|i| i.enabled) {
        let raw = format!("{}:{}", instance.ip, instance.port);
        urls.push(
            &raw,
            ProviderUrl::from_nacos(&instance.ip, instance.port, &instance.metadata),
        );
    }
    urls
}

/// The URLs of `key` in `group`, from the server.
pub(super) async fn list(reader: &Reader, group: &str, key: &InterfaceKey) -> Result<ProviderUrls> {
    crate::model::names::validate_interface(&key.interface)?;
    let service = service_of(key);
    let listed = reader
        .naming()
        .await?
        .get_all_instances(service.clone(), Some(group.to_owned()), Vec::new(), false)
        .await
        .map_err(|e| map_error(e, &format!("list {group}@@{service}")))?;
    Ok(read(&listed))
}

/// Follows the URLs of `key` in `group`: subscribe, list, then a read of the SDK's cache
/// per notification.
pub(super) async fn follow(
    reader: Arc<Reader>,
    group: String,
    key: InterfaceKey,
) -> Result<ProviderUrlFollow> {
    crate::model::names::validate_interface(&key.interface)?;
    let service = service_of(&key);
    let naming = reader.naming().await?.clone();
    let (signal, mut changed) = mpsc::channel(1);
    let subscription = Subscription::start(&naming, &service, &group, signal)
        .await
        .map_err(|e| map_error(e, &format!("subscribe {group}@@{service}")))?;
    let first = match list(&reader, &group, &key).await {
        Ok(first) => first,
        Err(e) => {
            subscription.end().await;
            return Err(e);
        }
    };
    let (sets, follow) = ProviderUrlFollow::channel();
    let mut last = first.clone();
    let _ = sets.try_send(Ok(first));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = sets.closed() => break,
                Some(()) = changed.recv() => {}
            }
            let item = naming
                .get_all_instances(service.clone(), Some(group.clone()), Vec::new(), true)
                .await
                .map(|listed| read(&listed))
                .map_err(|e| map_error(e, &format!("read {group}@@{service}")).ending_follow());
            if let Ok(set) = &item {
                if *set == last {
                    continue;
                }
                last = set.clone();
            }
            if !forward(&sets, item) {
                break;
            }
        }
        subscription.end().await;
    });
    Ok(follow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn services_are_named_as_java_names_them() {
        assert_eq!(
            service_of(&InterfaceKey::new("helloworld.Greeter")),
            "providers:helloworld.Greeter::"
        );
        let key = InterfaceKey {
            interface: "shop.Orders$V2".into(),
            version: "1.0.0".into(),
            group: "gray".into(),
        };
        assert_eq!(service_of(&key), "providers:shop.Orders___V2:1.0.0:gray");
    }

    #[test]
    fn disabled_instances_are_left_out_and_bad_ones_skipped() {
        let instance = |port: i32, enabled: bool, protocol: Option<&str>| {
            let mut metadata: HashMap<String, String> =
                [("path".to_owned(), "shop.A".to_owned())].into();
            if let Some(protocol) = protocol {
                metadata.insert("protocol".into(), protocol.into());
            }
            NacosInstance {
                ip: "10.0.0.1".into(),
                port,
                enabled,
                metadata,
                ..NacosInstance::default()
            }
        };
        let urls = read(&[
            instance(1, true, Some("tri")),
            instance(2, false, Some("tri")),
            instance(3, true, None),
            instance(0, true, Some("tri")),
        ]);
        assert_eq!(urls.urls.len(), 1);
        assert_eq!(urls.urls[0].port, 1);
        assert_eq!(urls.skipped.len(), 2, "{:?}", urls.skipped);
    }
}
