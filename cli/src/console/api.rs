//! The console's HTTP surface: the page's assets, the JSON API and the event stream (see
//! the [module docs](super) for the routes). Every string a response carries from the
//! registry is cut to [`MAX_STRING`](super::bounded::MAX_STRING) characters, and every list is paged or capped, so a
//! hostile or huge fleet gives bounded answers.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::routing::{get, post};
use futures::Stream;
use introspect::consumer::{MigrationStep, Resolver, Subscription};
use introspect::{Error, ServiceInstance};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::sync::broadcast::error::RecvError;

use super::action_log::Actions;
use super::actions;
use super::assets;
use super::auth::Auth;
use super::fleet::{Fleet, holds_json, share, summary};
use super::routing;
use super::shared::{READ_TIMEOUT, Shared, answer, failure};
use crate::json::{endpoint_json, revision_report_json};

/// Instances per page of `/api/app` by default, and at most.
const DEFAULT_LIMIT: usize = 500;
const MAX_LIMIT: usize = 2000;
/// Endpoints `/api/service` lists at most (the total is always exact).
const MAX_ENDPOINTS: usize = 2000;
/// Consumer subscriptions `/api/consumers` lists at most (the total is always exact).
const MAX_CONSUMERS: usize = 2000;
/// Apps `/api/apps` lists at most (the total is always exact).
const MAX_APPS: usize = 5000;

/// The console's routes over `fleet`, guarded by `auth`.
pub fn router(fleet: Arc<Fleet>, auth: Arc<Auth>) -> Router {
    let shared = Shared {
        fleet,
        auth,
        explains: Arc::new(Semaphore::new(routing::MAX_EXPLAINS)),
        actions: Arc::new(Actions::default()),
    };
    let api = Router::new()
        .route("/apps", get(apps))
        .route("/app", get(app))
        .route("/service", get(service))
        .route("/consumers", get(consumers))
        .route("/route", get(routing::route))
        .route("/events", get(events))
        .route("/session", get(actions::session))
        .route("/audit", get(actions::audit))
        .route("/actions", get(actions::rules))
        .route("/actions/disable", post(actions::disable))
        .route("/actions/enable", post(actions::enable))
        .route("/actions/weight", post(actions::weight))
        .route("/actions/tag", post(actions::tag))
        .route_layer(middleware::from_fn_with_state(shared.clone(), guard))
        .route("/login", post(login))
        .fallback(|| async { failure(StatusCode::NOT_FOUND, "no such API") });
    Router::new()
        .route("/", get(assets::index))
        .route("/console.js", get(assets::script))
        .route("/console.css", get(assets::style))
        .nest("/api", api)
        .layer(DefaultBodyLimit::max(4096))
        .layer(middleware::from_fn(headers))
        .with_state(shared)
}

/// Security headers on every answer; API answers are never cached.
async fn headers(request: Request, next: Next) -> Response {
    let api = request.uri().path().starts_with("/api/");
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
             img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if api {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// Refuses API requests that show neither the token nor a session (see [`Auth`]); the
/// others carry who asks ([`super::auth::Caller`]) to the handlers.
async fn guard(State(shared): State<Shared>, mut request: Request, next: Next) -> Response {
    if let Some(caller) = shared.auth.caller(request.headers()) {
        request.extensions_mut().insert(caller);
        return next.run(request).await;
    }
    if shared.auth.needs_token() {
        failure(StatusCode::UNAUTHORIZED, "a token is needed: log in")
    } else {
        failure(
            StatusCode::FORBIDDEN,
            "the console answers loopback hosts only",
        )
    }
}

fn timed_out() -> Error {
    Error::Timeout {
        what: "the console's read".into(),
        after: READ_TIMEOUT,
    }
}

#[derive(serde::Deserialize)]
struct Login {
    token: String,
}

/// `POST /api/login`: the token for a session cookie.
async fn login(
    State(shared): State<Shared>,
    body: Result<axum::Json<Login>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let auth = &shared.auth;
    if !auth.needs_token() {
        return answer(json!({"ok": true, "token_needed": false}));
    }
    match body {
        Ok(axum::Json(login)) if auth.token_matches(&login.token) => {
            let (cookie, label) = auth.open_session();
            let mut response = answer(json!({"ok": true, "session": format!("session:{label}")}));
            if let Ok(cookie) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, cookie);
            }
            response
        }
        _ => failure(StatusCode::UNAUTHORIZED, "wrong token"),
    }
}

#[derive(serde::Deserialize)]
struct AppsQuery {
    q: Option<String>,
}

/// `GET /api/apps[?q=TEXT]`: every app's summary (those whose name contains TEXT).
async fn apps(State(shared): State<Shared>, Query(query): Query<AppsQuery>) -> Response {
    let (mut apps, error) = shared.fleet.summaries();
    if let Some(q) = query.q.as_deref().filter(|q| !q.is_empty()) {
        let q = q.to_lowercase();
        apps.retain(|a| {
            a["app"]
                .as_str()
                .is_some_and(|n| n.to_lowercase().contains(&q))
        });
    }
    let total = apps.len();
    apps.truncate(MAX_APPS);
    answer(json!({
        "registry": shared.fleet.resolver.backend().name(),
        "total": total,
        "apps": apps,
        "error": error,
    }))
}

#[derive(serde::Deserialize)]
struct AppQuery {
    name: String,
    offset: Option<usize>,
    limit: Option<usize>,
    a: Option<String>,
    b: Option<String>,
}

/// `GET /api/app?name=APP`: see the module docs.
async fn app(State(shared): State<Shared>, Query(query): Query<AppQuery>) -> Response {
    let fleet = &shared.fleet;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let read = fleet.with_app(&query.name, |entry| {
        let snapshot = entry.snapshot.clone();
        let mut by_revision: BTreeMap<String, Vec<Arc<ServiceInstance>>> = BTreeMap::new();
        for instance in snapshot.registered.values() {
            by_revision
                .entry(instance.revision().to_owned())
                .or_default()
                .push(instance.clone());
        }
        for hold in &snapshot.holds {
            by_revision
                .entry(hold.instance.revision().to_owned())
                .or_default()
                .push(hold.instance.clone());
        }
        let held: BTreeMap<&str, &str> = snapshot
            .holds
            .iter()
            .map(|h| (h.address.as_str(), h.cause.as_str()))
            .collect();
        let mut order: Vec<(String, Vec<Arc<ServiceInstance>>)> = by_revision.into_iter().collect();
        order.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
        let total: usize = order.iter().map(|(_, m)| m.len()).sum();
        let offset = query.offset.unwrap_or(0);
        let limit = query.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
        let page: Vec<Value> = order
            .iter()
            .flat_map(|(_, members)| members.iter())
            .skip(offset)
            .take(limit)
            .map(|i| {
                let address = i.key_address();
                let (seen, at_start) = entry.seen.get(&address).copied().unwrap_or((now, false));
                let metadata_service =
                    introspect::model::Authority::new(&i.host, i.metadata_service_port());
                json!({
                    "address": address,
                    "revision": i.revision(),
                    "enabled": i.enabled,
                    "healthy": i.healthy,
                    "stopping": i.is_stopping(),
                    "held": held.get(address.as_str()),
                    "set_aside": entry.aside.contains(&address),
                    "seen_since_ms": seen,
                    "seen_at_start": at_start,
                    "metadata_service": metadata_service.as_str(),
                    "storage_type": i.storage_type().as_str(),
                })
            })
            .collect();
        let summary = summary(&query.name, entry);
        let log: Vec<Value> = entry.log.iter().rev().map(|e| e.to_json()).collect();
        (snapshot, order, total, offset, limit, page, summary, log)
    });
    let Some((snapshot, order, total, offset, limit, page, summary, log)) = read else {
        return failure(
            StatusCode::NOT_FOUND,
            "no such app (yet): the console looks every few seconds",
        );
    };
    let resolver = &fleet.resolver;
    let name = query.name.as_str();
    let fetches = order.iter().map(|(revision, members)| async move {
        let refs: Vec<&Arc<ServiceInstance>> = members.iter().collect();
        // Revision `0` exports nothing: there is no metadata to fetch.
        let fetched = if revision == "0" {
            Ok(Arc::new(introspect::MetadataInfo {
                app: name.to_owned(),
                revision: revision.clone(),
                services: BTreeMap::new(),
            }))
        } else {
            tokio::time::timeout(READ_TIMEOUT, resolver.metadata(name, revision, &refs))
                .await
                .unwrap_or_else(|_| Err(timed_out()))
        };
        let mut value = json!({
            "revision": revision,
            "instances": members.len(),
            "share": share(members.len(), total),
        });
        match fetched {
            Ok(info) => {
                value["services"] = info
                    .services
                    .iter()
                    .map(|(key, s)| {
                        json!({
                            "match_key": key, "name": s.name, "group": s.group,
                            "version": s.version, "protocol": s.protocol, "port": s.port,
                            "path": s.path, "params": s.params,
                        })
                    })
                    .collect();
            }
            Err(e) => value["error"] = json!(e.to_string()),
        }
        value
    });
    let revisions = futures::future::join_all(fetches).await;
    let mut value = json!({
        "registry": resolver.backend().name(),
        "app": query.name,
        "synced": snapshot.synced,
        "protection_active": snapshot.protection_active,
        "summary": summary,
        "revisions": revisions,
        "holds": holds_json(&snapshot, MAX_LIMIT),
        "instances_total": total,
        "offset": offset,
        "limit": limit,
        "instances": page,
        "log": log,
    });
    if let (Some(a), Some(b)) = (&query.a, &query.b) {
        let asked = [a.clone(), b.clone()];
        let instances = resolver.backend().instances().clone();
        let report = tokio::time::timeout(
            READ_TIMEOUT,
            crate::revision::gather(&*instances, resolver, &query.name, &asked),
        )
        .await
        .unwrap_or_else(|_| Err(timed_out()));
        value["diff"] = match report {
            Ok(report) => revision_report_json(&report),
            Err(e) => json!({"error": e.to_string()}),
        };
    }
    answer(value)
}

#[derive(serde::Deserialize)]
struct ServiceQuery {
    name: String,
    group: Option<String>,
    version: Option<String>,
    protocol: Option<String>,
}

/// `GET /api/service?name=IFACE`: the mapping's apps and the endpoints `resolve` gives.
async fn service(State(shared): State<Shared>, Query(query): Query<ServiceQuery>) -> Response {
    let nonempty = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
    let mut subscription = Subscription::new(&query.name);
    subscription.group = nonempty(&query.group);
    subscription.version = nonempty(&query.version);
    subscription.protocol = nonempty(&query.protocol);
    // The application level alone here: the interface level is read apart, below.
    subscription.migration = Some(MigrationStep::ForceApplication);
    let resolver = &shared.fleet.resolver;
    let apps = match resolver.apps(&subscription).await {
        Ok(apps) => apps,
        Err(e) => return failure(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let instances = resolver.backend().instances().clone();
    let resolved = tokio::time::timeout(
        READ_TIMEOUT,
        crate::unreadable::resolve(resolver, &*instances, &subscription),
    )
    .await
    .unwrap_or_else(|_| Err(timed_out()));
    let mut value = json!({
        "registry": resolver.backend().name(),
        "interface": query.name,
        "apps": apps,
    });
    let application_total = resolved.as_ref().map_or(0, |r| r.endpoints.len());
    let (interface, interface_total) = interface_level(resolver, &subscription).await;
    value["interface_level"] = interface;
    value["migration"] = json!(migration_state(application_total, interface_total));
    match resolved {
        Ok(resolved) => {
            value["total"] = json!(resolved.endpoints.len());
            value["endpoints"] = resolved
                .endpoints
                .iter()
                .take(MAX_ENDPOINTS)
                .map(endpoint_json)
                .collect();
            value["unreadable"] = json!(resolved.unreadable.map(|e| e.to_string()));
        }
        Err(e) => {
            value["total"] = json!(0);
            value["endpoints"] = json!([]);
            value["error"] = json!(e.to_string());
        }
    }
    answer(value)
}

/// The interface level of `subscription` as the service page shows it: its callable
/// provider URLs (at most [`MAX_ENDPOINTS`]), or why it cannot be read (the embedded store
/// has none); and how many callable ones it has. One read of the level.
async fn interface_level(resolver: &Resolver, subscription: &Subscription) -> (Value, usize) {
    let mut interface_only = subscription.clone();
    interface_only.migration = Some(MigrationStep::ForceInterface);
    match tokio::time::timeout(READ_TIMEOUT, resolver.resolve(&interface_only))
        .await
        .unwrap_or_else(|_| Err(timed_out()))
    {
        Ok(endpoints) => {
            let value = json!({
                "total": endpoints.len(),
                "endpoints": endpoints.iter().take(MAX_ENDPOINTS).map(endpoint_json).collect::<Vec<_>>(),
            });
            (value, endpoints.len())
        }
        Err(e) => (
            json!({"total": 0, "endpoints": [], "error": e.to_string()}),
            0,
        ),
    }
}

/// Where an interface stands in a migration to application-level discovery, from the
/// endpoints each level has: `application` (done), `both` (its providers register both),
/// `interface-only` (the work left: consumers reading the application level alone cannot
/// call it) or `none`.
pub fn migration_state(application: usize, interface: usize) -> &'static str {
    match (application > 0, interface > 0) {
        (true, false) => "application",
        (true, true) => "both",
        (false, true) => "interface-only",
        (false, false) => "none",
    }
}

#[derive(serde::Deserialize)]
struct ConsumersQuery {
    interface: Option<String>,
    app: Option<String>,
}

/// `GET /api/consumers[?interface=IFACE|app=APP]`: the registered consumers' subscriptions
/// (to the interface, or routing to the app), each compared with the console's own digest.
async fn consumers(State(shared): State<Shared>, Query(query): Query<ConsumersQuery>) -> Response {
    let interface = query.interface.filter(|i| !i.is_empty());
    let app = query.app.filter(|a| !a.is_empty());
    let mut value = shared.fleet.audit.rows(
        |row| {
            interface
                .as_ref()
                .is_none_or(|i| row.service.interface == *i)
                && app.as_ref().is_none_or(|a| row.apps.contains(a))
        },
        MAX_CONSUMERS,
    );
    value["registry"] = json!(shared.fleet.resolver.backend().name());
    answer(value)
}

/// `GET /api/events`: server-sent events: `app` (an app's new summary and its changes),
/// `removed` (an app left), `apps` (looking for apps failed or recovered), `consumers` (a
/// consumer's verdict changed), `resync` (the page fell behind: read again).
async fn events(
    State(shared): State<Shared>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let receiver = shared.fleet.events();
    let stopped = shared.fleet.stopped();
    let hello = SseEvent::default().event("hello").data("{}");
    let stream = futures::stream::unfold(
        (receiver, stopped, Some(hello)),
        |(mut receiver, mut stopped, first)| async move {
            if let Some(first) = first {
                return Some((Ok(first), (receiver, stopped, None)));
            }
            let next = tokio::select! {
                next = receiver.recv() => next,
                _ = stopped.wait_for(|stopped| *stopped) => return None,
            };
            let event = match next {
                Ok(event) => SseEvent::default()
                    .event(event.name)
                    .data(event.data.as_str()),
                Err(RecvError::Lagged(missed)) => SseEvent::default()
                    .event("resync")
                    .data(json!({"missed": missed}).to_string()),
                Err(RecvError::Closed) => return None,
            };
            Some((Ok(event), (receiver, stopped, None)))
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::default())
}
