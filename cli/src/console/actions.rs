//! The console's write actions: disable one instance, enable it again, set its weight, tag
//! it. Each writes the rule dubbo-admin writes for the same action (see
//! [`crate::rule::instance`] for the YAML), merged into the rule already there, by
//! compare-and-set in group `dubbo`.
//!
//! Who may act: only a console started with a token, and only a caller who shows it (a
//! logged-in session, or `Authorization: Bearer`). A console without a token is read-only
//! (it answers 403 with why), even on loopback: a write to the fleet's rules is always
//! someone's, and the log names whose. A request whose `Origin` is not the console's own
//! is refused too (the cookie is SameSite=Strict already; this also stops another site's
//! page from using a token-less browser's loopback).
//!
//! How: the console reads the rule, edits it, and writes it against the version it read;
//! when someone else wrote in between (a conflict) it reads and edits once more, and
//! reports a second conflict with the rule as it now is. The console's own actions take
//! turns, so two of its users never conflict with each other. Adding (disable, a weight, a
//! tag) needs the instance to be one the console sees in the app; taking away (enable,
//! clearing, untagging) does not, so a rule naming a departed instance can be cleaned.
//!
//! Every decided action is recorded in the [action log](super::action_log) and sent to the
//! open pages as an `action` event.

use std::net::SocketAddr;

use axum::extract::rejection::JsonRejection;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use introspect::Error;
use introspect::backend::config::{ConfigItem, ConfigKey, DEFAULT_GROUP};
use introspect::model::names::validate_app;
use serde_json::{Map, Value, json};

use super::action_log::ActionRecord;
use super::auth::Caller;
use super::shared::{READ_TIMEOUT, Shared, answer, failure};
use crate::rule::instance::{self, Change, Edited, InstanceRules, MAX_WEIGHT};
use crate::rule::write::{self, Expect};

/// Which action a request asks for; its body says for what.
#[derive(Clone, Copy)]
enum Kind {
    Disable,
    Enable,
    Weight,
    Tag,
}

/// `POST /api/actions/disable` `{"app", "address"}`.
pub(super) async fn disable(
    state: State<Shared>,
    caller: Option<Extension<Caller>>,
    peer: ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Result<Json<Value>, JsonRejection>,
) -> Response {
    act(state, caller, peer, headers, body, Kind::Disable).await
}

/// `POST /api/actions/enable` `{"app", "address"}`.
pub(super) async fn enable(
    state: State<Shared>,
    caller: Option<Extension<Caller>>,
    peer: ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Result<Json<Value>, JsonRejection>,
) -> Response {
    act(state, caller, peer, headers, body, Kind::Enable).await
}

/// `POST /api/actions/weight` `{"app", "address", "weight": N | null}` (null clears it).
pub(super) async fn weight(
    state: State<Shared>,
    caller: Option<Extension<Caller>>,
    peer: ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Result<Json<Value>, JsonRejection>,
) -> Response {
    act(state, caller, peer, headers, body, Kind::Weight).await
}

/// `POST /api/actions/tag` `{"app", "address", "tag": NAME | null}` (null untags it).
pub(super) async fn tag(
    state: State<Shared>,
    caller: Option<Extension<Caller>>,
    peer: ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Result<Json<Value>, JsonRejection>,
) -> Response {
    act(state, caller, peer, headers, body, Kind::Tag).await
}

/// `GET /api/session`: whether this caller may act, and the session's label.
pub(super) async fn session(
    State(shared): State<Shared>,
    caller: Option<Extension<Caller>>,
) -> Response {
    let caller = caller.map(|Extension(c)| c);
    let refused = may_act(&shared, caller.as_ref()).err();
    answer(json!({
        "token_needed": shared.auth.needs_token(),
        "session": caller.as_ref().map(Caller::label),
        "actions": refused.is_none(),
        "why_not": refused.map(|(_, why)| why),
    }))
}

/// `GET /api/audit`: the action log, newest first.
pub(super) async fn audit(State(shared): State<Shared>) -> Response {
    let (actions, recorded) = shared.actions.log.list();
    answer(json!({
        "kept": actions.len(),
        "recorded": recorded,
        "max": super::action_log::MAX_ACTIONS,
        "actions": actions,
    }))
}

#[derive(serde::Deserialize)]
pub(super) struct RulesQuery {
    app: String,
}

/// `GET /api/actions?app=APP`: what the app's rules say per instance, in the forms the
/// actions write (which addresses are disabled, their weights, their tags).
pub(super) async fn rules(
    State(shared): State<Shared>,
    Query(query): Query<RulesQuery>,
) -> Response {
    if let Err(e) = validate_app(&query.app) {
        return failure(StatusCode::BAD_REQUEST, &e.to_string());
    }
    let config = shared.fleet.resolver.backend().config().clone();
    let read = |key: String| {
        let config = config.clone();
        async move {
            let read = async {
                config
                    .get(&ConfigKey::new(key.as_str(), DEFAULT_GROUP)?)
                    .await
            };
            let got = tokio::time::timeout(READ_TIMEOUT, read).await;
            let state = match got {
                Ok(Ok(item)) => Ok(item),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err("the config centre did not answer in time".to_owned()),
            };
            (key, state)
        }
    };
    let ((ckey, configurators), (tkey, tags)) = tokio::join!(
        read(Change::Disable.key(&query.app)),
        read(Change::Tag(None).key(&query.app))
    );
    let text = |state: &Result<Option<ConfigItem>, String>| {
        state
            .as_ref()
            .ok()
            .and_then(|item| item.as_ref().map(|i| i.content.clone()))
    };
    let ctext = text(&configurators);
    let ttext = text(&tags);
    let found = InstanceRules::read(ctext.as_deref(), ttext.as_deref());
    let describe = |key: &str, state: &Result<Option<ConfigItem>, String>| match state {
        Ok(Some(item)) => {
            json!({"key": key, "version": item.version.as_str(), "content": item.content})
        }
        Ok(None) => json!({"key": key, "version": null, "content": null}),
        Err(e) => json!({"key": key, "error": e}),
    };
    answer(json!({
        "app": query.app,
        "group": DEFAULT_GROUP,
        "disabled": found.disabled,
        "weights": found.weights,
        "tags": found.tags,
        "rules": [describe(&ckey, &configurators), describe(&tkey, &tags)],
    }))
}

/// Whether `caller` may act on this console; the refusal's status and reason otherwise.
fn may_act(shared: &Shared, caller: Option<&Caller>) -> Result<(), (StatusCode, String)> {
    if !shared.auth.needs_token() {
        return Err((
            StatusCode::FORBIDDEN,
            "this console is read-only: actions need a token (start it with --token-env)".into(),
        ));
    }
    match caller {
        Some(Caller::Session(_) | Caller::Bearer) => Ok(()),
        _ => Err((StatusCode::UNAUTHORIZED, "a token is needed: log in".into())),
    }
}

/// Whether the request's `Origin`, when it has one, is the console itself.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    // `https://` too: behind a proxy that ends TLS and keeps the Host.
    let origin = origin.to_str().ok().and_then(|o| {
        o.strip_prefix("http://")
            .or_else(|| o.strip_prefix("https://"))
    });
    matches!((origin, host), (Some(o), Some(h)) if o.eq_ignore_ascii_case(h))
}

/// The request's target and change, or why the body is refused.
struct Asked {
    app: String,
    address: String,
    change: Change,
    value: Option<String>,
}

fn string_field(body: &Map<String, Value>, name: &str) -> Result<String, String> {
    match body.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("{name} must be a string")),
        None => Err(format!("{name} is needed")),
    }
}

fn parse_body(kind: Kind, body: Json<Value>) -> Result<Asked, String> {
    let Json(Value::Object(body)) = body else {
        return Err("the body must be a JSON object".into());
    };
    let allowed: &[&str] = match kind {
        Kind::Disable | Kind::Enable => &["app", "address"],
        Kind::Weight => &["app", "address", "weight"],
        Kind::Tag => &["app", "address", "tag"],
    };
    if let Some(unknown) = body.keys().find(|k| !allowed.contains(&k.as_str())) {
        let unknown: String = unknown.chars().take(64).collect();
        return Err(format!(
            "unknown field {:?} (this action takes {})",
            unknown,
            allowed.join(", ")
        ));
    }
    let app = string_field(&body, "app")?;
    validate_app(&app).map_err(|e| e.to_string())?;
    let address = string_field(&body, "address")?;
    instance::validate_address(&address).map_err(|e| e.to_string())?;
    let (change, value) = match kind {
        Kind::Disable => (Change::Disable, None),
        Kind::Enable => (Change::Enable, None),
        Kind::Weight => {
            let bad = || {
                format!("weight must be a whole number from 0 to {MAX_WEIGHT}, or null to clear it")
            };
            match body.get("weight") {
                None => return Err("weight is needed (null clears it)".into()),
                Some(Value::Null) => (Change::Weight(None), None),
                Some(Value::Number(n)) => {
                    let weight = n
                        .as_u64()
                        .filter(|w| *w <= u64::from(MAX_WEIGHT))
                        .ok_or_else(bad)?;
                    (
                        Change::Weight(Some(weight as u32)),
                        Some(weight.to_string()),
                    )
                }
                Some(_) => return Err(bad()),
            }
        }
        Kind::Tag => match body.get("tag") {
            None => return Err("tag is needed (null untags)".into()),
            Some(Value::Null) => (Change::Tag(None), None),
            Some(Value::String(t)) if t.is_empty() => (Change::Tag(None), None),
            Some(Value::String(t)) => {
                instance::validate_tag(t).map_err(|e| e.to_string())?;
                (Change::Tag(Some(t.clone())), Some(t.clone()))
            }
            Some(_) => return Err("tag must be a string, or null to untag".into()),
        },
    };
    Ok(Asked {
        app,
        address,
        change,
        value,
    })
}

/// What the write came to.
struct Written {
    change: &'static str,
    before: Option<String>,
    after: Option<String>,
    content: Option<String>,
}

/// Why an action failed past its input.
enum Failed {
    /// The current rule cannot take the change (see [`instance::edit`]).
    Refused(String),
    /// Someone else wrote twice; the rule as it is now.
    Conflict(Option<ConfigItem>),
    /// The config centre failed.
    Error(String),
}

/// Reads, edits and writes by compare-and-set; a conflict is retried once.
async fn apply(shared: &Shared, asked: &Asked, key: &str) -> (Result<Written, Failed>, bool) {
    let config = shared.fleet.resolver.backend().config().clone();
    let config = &*config;
    let mut retried = false;
    loop {
        let read = async { config.get(&ConfigKey::new(key, DEFAULT_GROUP)?).await };
        let current = match read.await {
            Ok(current) => current,
            Err(e) => return (Err(Failed::Error(e.to_string())), retried),
        };
        let before = current.as_ref().map(|c| c.version.clone());
        let edited = instance::edit(
            &asked.app,
            &asked.address,
            &asked.change,
            current.as_ref().map(|c| c.content.as_str()),
        );
        let written = match edited {
            Err(e) => return (Err(Failed::Refused(e.to_string())), retried),
            Ok(Edited::Unchanged) => Ok(Written {
                change: "unchanged",
                before: before.as_ref().map(|v| v.to_string()),
                after: before.as_ref().map(|v| v.to_string()),
                content: current.map(|c| c.content),
            }),
            Ok(Edited::Put(text)) => {
                let expect = before.clone().map_or(Expect::Absent, Expect::Version);
                write::put(config, key, DEFAULT_GROUP, &text, expect)
                    .await
                    .map(|version| Written {
                        change: "written",
                        before: before.as_ref().map(|v| v.to_string()),
                        after: Some(version.to_string()),
                        content: Some(text),
                    })
            }
            Ok(Edited::Delete) => write::delete(config, key, DEFAULT_GROUP, before.clone())
                .await
                .map(|version| Written {
                    change: "deleted",
                    before: Some(version.to_string()),
                    after: None,
                    content: None,
                }),
        };
        match written {
            Ok(written) => return (Ok(written), retried),
            Err(Error::Conflict { .. }) if !retried => retried = true,
            Err(Error::Conflict { current, .. }) => {
                return (Err(Failed::Conflict(current)), retried);
            }
            // A delete of a rule deleted meanwhile is a conflict too.
            Err(Error::NotFound(_)) if !retried => retried = true,
            Err(e) => return (Err(Failed::Error(e.to_string())), retried),
        }
    }
}

/// One action, from the request to its record.
async fn act(
    State(shared): State<Shared>,
    caller: Option<Extension<Caller>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Result<Json<Value>, JsonRejection>,
    kind: Kind,
) -> Response {
    let caller = caller.map(|Extension(c)| c);
    if let Err((status, why)) = may_act(&shared, caller.as_ref()) {
        return failure(status, &why);
    }
    if !same_origin(&headers) {
        return failure(
            StatusCode::FORBIDDEN,
            "the request comes from another origin than the console",
        );
    }
    let session = caller.as_ref().map_or_else(String::new, Caller::label);
    let name = match kind {
        Kind::Disable => "disable",
        Kind::Enable => "enable",
        Kind::Weight => "weight",
        Kind::Tag => "tag",
    };
    let mut record = ActionRecord {
        id: 0,
        at_ms: now_ms(),
        session,
        client: peer.to_string(),
        action: name.to_owned(),
        app: String::new(),
        address: String::new(),
        value: None,
        key: String::new(),
        group: DEFAULT_GROUP.to_owned(),
        outcome: "refused",
        change: None,
        version_before: None,
        version_after: None,
        retried: false,
        error: None,
    };
    let parsed = match body {
        Ok(body) => parse_body(kind, body).map_err(|why| (StatusCode::BAD_REQUEST, why)),
        // Not JSON, not declared as JSON, too large (413).
        Err(rejection) => Err((rejection.status(), rejection.body_text())),
    };
    let asked = match parsed {
        Ok(asked) => asked,
        Err((status, why)) => {
            record.error = Some(why.clone());
            let record = shared.actions.log.record(record);
            shared.fleet.send("action", json!(record));
            return failure(status, &why);
        }
    };
    let key = asked.change.key(&asked.app);
    record.action = asked.change.name().to_owned();
    record.app = asked.app.clone();
    record.address = asked.address.clone();
    record.value = asked.value.clone();
    record.key = key.clone();
    if asked.change != Change::Enable
        && !matches!(asked.change, Change::Weight(None) | Change::Tag(None))
        && !sees(&shared, &asked.app, &asked.address)
    {
        let why = format!(
            "the console sees no instance {} in app {}: it acts only on instances it sees \
             (enable, clearing a weight and untagging work on any)",
            asked.address, asked.app
        );
        record.error = Some(why.clone());
        let record = shared.actions.log.record(record);
        shared.fleet.send("action", json!(record));
        return failure(StatusCode::NOT_FOUND, &why);
    }
    let turn = shared.actions.turn.lock().await;
    let applied = tokio::time::timeout(READ_TIMEOUT, apply(&shared, &asked, &key)).await;
    drop(turn);
    let (result, retried) = applied.unwrap_or_else(|_| {
        (
            Err(Failed::Error(
                "the config centre did not answer in time".into(),
            )),
            false,
        )
    });
    record.retried = retried;
    record.at_ms = now_ms();
    let (status, mut value) = match result {
        Ok(written) => {
            record.outcome = "ok";
            record.change = Some(written.change);
            record.version_before = written.before.clone();
            record.version_after = written.after.clone();
            (
                StatusCode::OK,
                json!({
                    "ok": true,
                    "change": written.change,
                    "content": written.content,
                }),
            )
        }
        Err(Failed::Refused(why)) => {
            record.error = Some(why.clone());
            (StatusCode::UNPROCESSABLE_ENTITY, json!({"error": why}))
        }
        Err(Failed::Conflict(current)) => {
            let why = format!(
                "{key} changed twice while this action wrote it: nothing was written; \
                 look at the rule as it is now and try again"
            );
            record.outcome = "conflict";
            record.error = Some(why.clone());
            record.version_before = current.as_ref().map(|c| c.version.to_string());
            (
                StatusCode::CONFLICT,
                json!({
                    "error": why,
                    "current": current.map(|c| json!({"version": c.version.as_str(), "content": c.content})),
                }),
            )
        }
        Err(Failed::Error(why)) => {
            record.outcome = "error";
            record.error = Some(why.clone());
            (StatusCode::BAD_GATEWAY, json!({"error": why}))
        }
    };
    let record = shared.actions.log.record(record);
    shared.fleet.send("action", json!(record));
    value["action"] = json!(record);
    let mut response = answer(value);
    *response.status_mut() = status;
    response.into_response()
}

/// Whether the console sees `address` among `app`'s instances (registered or held).
fn sees(shared: &Shared, app: &str, address: &str) -> bool {
    shared
        .fleet
        .with_app(app, |entry| {
            entry.snapshot.registered.contains_key(address)
                || entry.snapshot.holds.iter().any(|h| h.address == address)
        })
        .unwrap_or(false)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
