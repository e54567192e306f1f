//! What every handler of the console shares: the state they read ([`Shared`]), how long
//! they wait, and how they answer. A leaf of the HTTP surface: the router (`api`) and the
//! handlers (`api`, `routing`, `actions`) all use it, and it uses none of them.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::action_log::Actions;
use super::auth::Auth;
use super::bounded::clip;
use super::fleet::Fleet;

/// How long an answer waits for metadata or a resolve.
pub(super) const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What every handler reads: the fleet, the access rules, the turns of the route
/// explanations (see [`routing`](super::routing)) and the actions with their log (see
/// [`actions`](super::actions)).
#[derive(Clone)]
pub(super) struct Shared {
    pub(super) fleet: Arc<Fleet>,
    pub(super) auth: Arc<Auth>,
    pub(super) explains: Arc<Semaphore>,
    pub(super) actions: Arc<Actions>,
}

/// An error answer: `{"error": message}` with `status`.
pub(super) fn failure(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(json!({"error": message}))).into_response()
}

/// `value` as a JSON answer, every string cut (see [`clip`]).
pub(super) fn answer(mut value: Value) -> Response {
    clip(&mut value);
    axum::Json(value).into_response()
}
