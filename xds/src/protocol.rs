//! The state-of-the-world protocol of one ADS stream, per resource type (pure): what a
//! request subscribes to, whether it is an ACK, a NACK or stale, and when a response is due.
//!
//! * A request whose `response_nonce` is not the nonce of the last response of its type
//!   is stale (the client had not yet seen that response) and is ignored.
//! * A request with `error_detail` is a NACK: the client keeps the previous version; the
//!   server logs it and sends nothing more until its resources change or the client's
//!   subscription does.
//! * Any other request ACKs the version it names. A request whose names differ from the
//!   current subscription (the first one, a subscribe, an unsubscribe) gets a response at
//!   once, even when the resources are the same.
//! * A change is pushed as a new version of the type carrying, for RDS and EDS, only the
//!   resources that changed (a name left out of those says nothing); LDS and CDS carry
//!   every resource, as their absence means removal.
//! * For LDS and CDS an empty first request (or one naming `*`) subscribes to everything;
//!   later empty requests keep a wildcard a wildcard. An empty request after named ones
//!   unsubscribes from everything.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::protobuf::Any;

use crate::types::{SERVED, omission_means_absent, wildcard_allowed};

/// What a request asks of the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A type this server does not serve: nothing to answer.
    Unserved,
    /// A stale request (its nonce is not the latest): ignored.
    Stale,
    /// A NACK of the last response; `respond` when the subscription changed with it.
    Nack {
        /// Whether the subscription changed, so a response is due anyway.
        respond: bool,
    },
    /// An ACK (or first request); `respond` when the subscription changed.
    Ack {
        /// Whether the subscription changed, so a response is due.
        respond: bool,
    },
}

/// What one resource type's subscription on one stream stands at.
#[derive(Debug, Default)]
struct TypeState {
    requested: bool,
    wildcard: bool,
    names: BTreeSet<String>,
    nonce: String,
    version: u64,
    /// The resources last sent, by name (`None`: nothing sent yet).
    sent: Option<BTreeMap<String, Any>>,
    acked_version: String,
}

/// One stream's protocol state, every resource type.
#[derive(Debug, Default)]
pub struct StreamProtocol {
    types: HashMap<String, TypeState>,
    nonces: u64,
}

/// What a response must cover: every existing resource (`Wildcard`) or these names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wanted {
    /// Every resource of the type that exists.
    Wildcard,
    /// The resources of these names that exist.
    Names(Vec<String>),
}

impl StreamProtocol {
    /// Takes a request in: updates the subscription of its type unless it is stale.
    pub fn on_request(&mut self, request: &DiscoveryRequest) -> Verdict {
        let type_url = request.type_url.as_str();
        if !SERVED.contains(&type_url) {
            return Verdict::Unserved;
        }
        let state = self.types.entry(type_url.to_owned()).or_default();
        if !request.response_nonce.is_empty() && request.response_nonce != state.nonce {
            return Verdict::Stale;
        }
        let names: BTreeSet<String> = request
            .resource_names
            .iter()
            .filter(|n| n.as_str() != "*")
            .cloned()
            .collect();
        let star = request.resource_names.iter().any(|n| n == "*");
        let wildcard = wildcard_allowed(type_url)
            && (star || (names.is_empty() && (!state.requested || state.wildcard)));
        let changed = !state.requested || wildcard != state.wildcard || names != state.names;
        state.requested = true;
        state.wildcard = wildcard;
        state.names = names;
        if request.error_detail.is_some() {
            Verdict::Nack { respond: changed }
        } else {
            if !request.response_nonce.is_empty() {
                state.acked_version = request.version_info.clone();
            }
            Verdict::Ack { respond: changed }
        }
    }

    /// The types the client has asked for, sorted.
    pub fn requested(&self) -> Vec<String> {
        let mut types: Vec<String> = self
            .types
            .iter()
            .filter(|(_, s)| s.requested)
            .map(|(t, _)| t.clone())
            .collect();
        types.sort();
        types
    }

    /// What a response of `type_url` must cover; `None` for a type not asked for.
    pub fn wanted(&self, type_url: &str) -> Option<Wanted> {
        let state = self.types.get(type_url).filter(|s| s.requested)?;
        Some(if state.wildcard {
            Wanted::Wildcard
        } else {
            Wanted::Names(state.names.iter().cloned().collect())
        })
    }

    /// The version the client last ACKed for `type_url` (empty for none).
    pub fn acked_version(&self, type_url: &str) -> &str {
        self.types
            .get(type_url)
            .map_or("", |s| s.acked_version.as_str())
    }

    /// A response of `type_url` for `resources` (by name), when due: always when
    /// `force`d (a new subscription), carrying them all; else only when some differ from
    /// those last sent, carrying them all for LDS and CDS and the ones that changed for
    /// RDS and EDS. Records its version and nonce.
    pub fn respond(
        &mut self,
        type_url: &str,
        resources: Vec<(String, Any)>,
        force: bool,
    ) -> Option<DiscoveryResponse> {
        let state = self.types.get_mut(type_url)?;
        let now: BTreeMap<String, Any> = resources.into_iter().collect();
        let changed = state.sent.as_ref() != Some(&now);
        if !force && !changed {
            return None;
        }
        let carried: Vec<Any> = match &state.sent {
            Some(sent) if !force && !omission_means_absent(type_url) => now
                .iter()
                .filter(|(name, any)| sent.get(*name) != Some(*any))
                .map(|(_, any)| any.clone())
                .collect(),
            _ => now.values().cloned().collect(),
        };
        if !force && carried.is_empty() {
            // Only removals, which RDS and EDS do not say: remembered, nothing sent.
            state.sent = Some(now);
            return None;
        }
        self.nonces += 1;
        if changed {
            state.version += 1;
        }
        state.nonce = self.nonces.to_string();
        state.sent = Some(now);
        Some(DiscoveryResponse {
            version_info: state.version.to_string(),
            resources: carried,
            type_url: type_url.to_owned(),
            nonce: state.nonce.clone(),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::google::rpc::Status;

    use super::*;
    use crate::types::{CLUSTER_LOAD_ASSIGNMENT, LISTENER};

    fn request(type_url: &str, names: &[&str], nonce: &str) -> DiscoveryRequest {
        DiscoveryRequest {
            type_url: type_url.to_owned(),
            resource_names: names.iter().map(|n| n.to_string()).collect(),
            response_nonce: nonce.to_owned(),
            ..Default::default()
        }
    }

    fn any(n: u8) -> Any {
        Any {
            type_url: LISTENER.to_owned(),
            value: vec![n],
        }
    }

    fn named(resources: &[(&str, u8)]) -> Vec<(String, Any)> {
        resources
            .iter()
            .map(|(name, n)| ((*name).to_owned(), any(*n)))
            .collect()
    }

    #[test]
    fn first_request_answers_then_ack_does_not() {
        let mut p = StreamProtocol::default();
        let first = p.on_request(&request(LISTENER, &["a"], ""));
        assert_eq!(first, Verdict::Ack { respond: true });
        let r = p.respond(LISTENER, named(&[("a", 1)]), true).unwrap();
        assert_eq!(r.version_info, "1");
        let mut ack = request(LISTENER, &["a"], &r.nonce);
        ack.version_info = r.version_info.clone();
        assert_eq!(p.on_request(&ack), Verdict::Ack { respond: false });
        assert_eq!(p.acked_version(LISTENER), "1");
        assert!(p.respond(LISTENER, named(&[("a", 1)]), false).is_none());
        let pushed = p.respond(LISTENER, named(&[("a", 2)]), false).unwrap();
        assert_eq!(pushed.version_info, "2");
        assert_ne!(pushed.nonce, r.nonce);
    }

    #[test]
    fn stale_nonces_are_ignored_and_nacks_keep_the_subscription() {
        let mut p = StreamProtocol::default();
        p.on_request(&request(CLUSTER_LOAD_ASSIGNMENT, &["a"], ""));
        let first = p
            .respond(CLUSTER_LOAD_ASSIGNMENT, named(&[("a", 1)]), true)
            .unwrap();
        let second = p
            .respond(CLUSTER_LOAD_ASSIGNMENT, named(&[("a", 2)]), false)
            .unwrap();
        let stale = request(CLUSTER_LOAD_ASSIGNMENT, &["a", "b"], &first.nonce);
        assert_eq!(p.on_request(&stale), Verdict::Stale);
        assert_eq!(
            p.wanted(CLUSTER_LOAD_ASSIGNMENT),
            Some(Wanted::Names(vec!["a".into()]))
        );
        let mut nack = request(CLUSTER_LOAD_ASSIGNMENT, &["a"], &second.nonce);
        nack.error_detail = Some(Status::default());
        assert_eq!(p.on_request(&nack), Verdict::Nack { respond: false });
        assert_eq!(p.acked_version(CLUSTER_LOAD_ASSIGNMENT), "");
    }

    #[test]
    fn wildcards_only_for_listeners_and_clusters() {
        let mut p = StreamProtocol::default();
        p.on_request(&request(LISTENER, &[], ""));
        assert_eq!(p.wanted(LISTENER), Some(Wanted::Wildcard));
        p.on_request(&request(CLUSTER_LOAD_ASSIGNMENT, &[], ""));
        assert_eq!(
            p.wanted(CLUSTER_LOAD_ASSIGNMENT),
            Some(Wanted::Names(vec![]))
        );
        // Named, then empty: an unsubscribe, not a wildcard.
        let mut q = StreamProtocol::default();
        q.on_request(&request(LISTENER, &["a"], ""));
        let r = q.respond(LISTENER, Vec::new(), true).unwrap();
        assert_eq!(
            q.on_request(&request(LISTENER, &[], &r.nonce)),
            Verdict::Ack { respond: true }
        );
        assert_eq!(q.wanted(LISTENER), Some(Wanted::Names(vec![])));
        assert_eq!(
            q.on_request(&request("type.googleapis.com/other", &[], "")),
            Verdict::Unserved
        );
    }

    #[test]
    fn a_change_carries_only_the_changed_routes_and_assignments() {
        let mut p = StreamProtocol::default();
        p.on_request(&request(CLUSTER_LOAD_ASSIGNMENT, &["a", "b"], ""));
        let first = p
            .respond(CLUSTER_LOAD_ASSIGNMENT, named(&[("a", 1), ("b", 1)]), true)
            .unwrap();
        assert_eq!(first.resources.len(), 2);
        let pushed = p
            .respond(CLUSTER_LOAD_ASSIGNMENT, named(&[("a", 1), ("b", 2)]), false)
            .unwrap();
        assert_eq!(pushed.resources, vec![any(2)], "b alone");
        assert_eq!(pushed.version_info, "2");
        // Listeners carry every one: a name left out is removed.
        p.on_request(&request(LISTENER, &["a", "b"], ""));
        p.respond(LISTENER, named(&[("a", 1), ("b", 1)]), true);
        let listeners = p
            .respond(LISTENER, named(&[("a", 1), ("b", 2)]), false)
            .unwrap();
        assert_eq!(listeners.resources.len(), 2);
    }
}
