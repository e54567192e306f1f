//! Whether a discovery level can answer calls, for `APPLICATION_FIRST`'s choice: Dubbo Java
//! checks at every call that the application level has an invoker it is connected to, and
//! calls the interface level otherwise. Here the same question is asked of consumer-side
//! health when the sets or health change: an application level whose every endpoint comes
//! from a held instance (gone from the registry), or is out (refused, failing every call,
//! hung), gives way to an interface level with an endpoint that is not. Pure reads of the
//! views' sets and of health.

use std::collections::BTreeMap;

use super::apps::AppState;
use super::handle::key_of;
use crate::consumer::health::{EndpointKey, HealthRegistry, Standing};
use crate::model::Endpoint;

/// Whether every endpoint of `application` (there is one) comes from an app whose
/// instances to route to are all held, or is out by health.
pub(super) fn cannot_answer(
    application: &[Endpoint],
    apps: &BTreeMap<String, AppState>,
    health: &HealthRegistry,
) -> bool {
    if application.is_empty() {
        return false;
    }
    let held = application
        .iter()
        .all(|endpoint| apps.get(&*endpoint.app).is_some_and(AppState::held_only));
    held || answering(application, health) == 0
}

/// How many of `endpoints` health does not hold out (refused, failing every call, hung,
/// held): those that can take a call now.
pub(super) fn answering(endpoints: &[Endpoint], health: &HealthRegistry) -> usize {
    let keys: Vec<EndpointKey> = endpoints.iter().map(key_of).collect();
    let keys: Vec<&EndpointKey> = keys.iter().collect();
    health
        .standing_of(&keys)
        .iter()
        .filter(|standing| !matches!(standing, Standing::Out))
        .count()
}
