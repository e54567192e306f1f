//! Endpoints from interface-level provider URLs. Pure: no I/O.
//!
//! A URL becomes the same [`Endpoint`] an application-level instance's service does, so
//! that routing, governance and the balanced channel treat both alike: its host and port,
//! its protocol, its app (the `application` parameter), and a [`ServiceInfo`] of the
//! interface, group, version, protocol, path and every parameter of the URL (`weight`,
//! `dubbo.tag`, `warmup`, `timeout`, …); `timestamp` (when the service was exported) is the
//! endpoint's start, as Dubbo Java's load balancer reads it for the warm-up. Its revision is
//! `url:` and a digest of the URL (no instance's revision has a `:`), so that a changed URL (a new weight) is a new endpoint at the same
//! address.
//!
//! A URL of another interface, group, version or protocol than the subscription asks is
//! left out; one Dubbo would not call (`disabled=true`, `enabled=false`) is left out and
//! counted; one whose protocol the channel does not speak (`dubbo://`) is counted and
//! named, never an endpoint.

use std::collections::BTreeSet;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::consumer::explain::InterfaceFindings;
use crate::governance::migration::MigrationStep;

use super::hosts::HostNames;
use super::subscription::Subscription;
use crate::backend::InterfaceKey;
use crate::model::{Endpoint, INTERFACE_REVISION_PREFIX, ProviderUrl, ServiceInfo};

/// The interface-level set of one subscription, and what was left out of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct InterfaceSet {
    /// The endpoints, sorted, without duplicates.
    pub endpoints: Vec<Endpoint>,
    /// URLs of the subscription's service whose protocol cannot be called, with those
    /// protocols.
    pub uncallable: usize,
    /// The protocols of those.
    pub uncallable_protocols: BTreeSet<String>,
    /// URLs of the subscription's service Dubbo would not call (`disabled`).
    pub disabled: usize,
    /// URLs of the interface with another group, version or protocol than asked.
    pub other_services: usize,
}

impl InterfaceSet {
    /// What the set offers a subscription at `step`, for an explanation: read, with
    /// `skipped` URLs that did not read.
    pub fn findings(&self, step: MigrationStep, skipped: usize) -> InterfaceFindings {
        InterfaceFindings {
            step,
            read: true,
            endpoints: self.endpoints.len(),
            uncallable: self.uncallable,
            uncallable_protocols: self.uncallable_protocols.iter().cloned().collect(),
            disabled: self.disabled,
            other_services: self.other_services,
            skipped,
            refused: None,
        }
    }
}

/// The revision an interface-level endpoint carries: `url:` and 16
/// hex digits of the URL's SHA-256.
fn revision_of(url: &ProviderUrl) -> String {
    let digest = Sha256::digest(url.to_full_string().as_bytes());
    format!("{INTERFACE_REVISION_PREFIX}{}", hex::encode(&digest[..8]))
}

/// The endpoint of `url`, with its host from `hosts`.
fn endpoint_of(url: &ProviderUrl, host: Arc<str>) -> Endpoint {
    let service = ServiceInfo {
        name: url.interface().to_owned(),
        group: url.group().to_owned(),
        version: url.version().to_owned(),
        protocol: url.protocol.clone(),
        port: url.port,
        path: url.path.clone(),
        params: url.params.clone(),
    };
    Endpoint {
        app: Arc::from(url.params.get("application").map_or("", String::as_str)),
        host,
        port: url.port,
        instance_port: url.port,
        protocol: Arc::from(url.protocol.as_str()),
        revision: Arc::from(revision_of(url)),
        service: Arc::new(service),
        timestamp: url
            .params
            .get("timestamp")
            .and_then(|t| t.parse().ok())
            .unwrap_or(0),
    }
}

/// The interface-level key `subscription` reads (empty slots for no version or group, as a
/// Java consumer without them asks).
pub(crate) fn interface_key(subscription: &Subscription) -> InterfaceKey {
    InterfaceKey {
        interface: subscription.interface.clone(),
        version: subscription.version.clone().unwrap_or_default(),
        group: subscription.group.clone().unwrap_or_default(),
    }
}

/// The interface-level set of `subscription` from `urls`.
pub(crate) fn interface_set(
    urls: &[ProviderUrl],
    subscription: &Subscription,
    hosts: &HostNames,
) -> InterfaceSet {
    let mut set = InterfaceSet::default();
    let mut hosts = hosts.lock();
    for url in urls {
        if url.interface() != subscription.interface {
            continue;
        }
        let wanted = subscription
            .group
            .as_deref()
            .is_none_or(|g| g == url.group())
            && subscription
                .version
                .as_deref()
                .is_none_or(|v| v == url.version())
            && subscription
                .protocol
                .as_deref()
                .is_none_or(|p| p == url.protocol);
        if !wanted {
            set.other_services += 1;
        } else if !url.is_callable() {
            set.uncallable += 1;
            set.uncallable_protocols.insert(url.protocol.clone());
        } else if !url.is_enabled() {
            set.disabled += 1;
        } else {
            set.endpoints.push(endpoint_of(url, hosts.get(&url.host)));
        }
    }
    set.endpoints.sort_unstable();
    set.endpoints.dedup();
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> ProviderUrl {
        ProviderUrl::parse(text).unwrap()
    }

    #[test]
    fn urls_become_endpoints_like_instances_do() {
        let urls = [
            url(
                "tri://10.0.0.2:50051/shop.A?application=shop&interface=shop.A&weight=300&timestamp=17&dubbo.tag=gray",
            ),
            url("tri://[::1]:50052/shop.A?application=shop&interface=shop.A"),
            url("dubbo://10.0.0.3:20880/shop.A?application=old&interface=shop.A"),
            url("tri://10.0.0.4:50051/shop.A?interface=shop.A&disabled=true"),
            url("tri://10.0.0.5:50051/shop.A?interface=shop.A&version=2.0"),
            url("grpc://10.0.0.6:50051/shop.B?interface=shop.B"),
        ];
        let hosts = HostNames::default();
        let set = interface_set(&urls, &Subscription::new("shop.A"), &hosts);
        let mut addresses: Vec<String> = set.endpoints.iter().map(Endpoint::address).collect();
        addresses.sort();
        assert_eq!(
            addresses,
            ["10.0.0.2:50051", "10.0.0.5:50051", "[::1]:50052"]
        );
        assert_eq!(set.uncallable, 1);
        assert_eq!(
            set.uncallable_protocols,
            BTreeSet::from(["dubbo".to_owned()])
        );
        assert_eq!(set.disabled, 1);
        let first = set
            .endpoints
            .iter()
            .find(|e| e.port == 50051 && &*e.app == "shop")
            .unwrap();
        assert_eq!(&*first.app, "shop");
        assert_eq!(&*first.protocol, "tri");
        assert_eq!(first.timestamp, 17);
        assert_eq!(first.params()["weight"], "300");
        assert_eq!(first.params()["dubbo.tag"], "gray");
        assert_eq!(first.service.name, "shop.A");
        assert!(first.revision.starts_with("url:"));
        assert!(first.is_interface_level());

        let versioned = interface_set(&urls, &Subscription::new("shop.A").version("2.0"), &hosts);
        assert_eq!(versioned.endpoints.len(), 1);
        assert_eq!(versioned.other_services, 4);
        // A changed URL at one address is a new revision there.
        let heavier =
            url("tri://10.0.0.2:50051/shop.A?application=shop&interface=shop.A&weight=400");
        let again = interface_set(&[heavier], &Subscription::new("shop.A"), &hosts);
        assert_ne!(again.endpoints[0].revision, first.revision);
    }
}
