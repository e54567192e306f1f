//! `GET /api/route`: where a call to one interface would go now, as a balanced channel
//! routes it ([`Resolver::explain_route`](introspect::consumer::Resolver::explain_route),
//! what `introspect route` prints): the rules in force, those refused or not applied with
//! why, the chain's steps, and per provider its tag, enabled state, effective weight and
//! whether it is routed (or by what it is routed out).
//!
//! Every parameter is untrusted: each is bounded in length and checked before anything is
//! read, a bad one is a 400 naming it. The work is bounded too: a few explanations at once
//! (each subscribes and reads the rule keys), each within the console's read deadline, and
//! at most [`MAX_PROVIDERS`] providers listed (the total is always exact).

use crate::rule::readers;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use introspect::Error;
use introspect::backend::config::DEFAULT_GROUP;
use introspect::consumer::{RouteQuery, Subscription};
use introspect::governance::CallTag;
use serde_json::{Value, json};

use super::shared::{READ_TIMEOUT, Shared, answer, failure};

/// The longest parameter accepted, in characters (interface names, apps, methods and tags
/// are far shorter).
pub const MAX_PARAM_CHARS: usize = 256;
/// Providers listed at most (the total is always exact).
pub const MAX_PROVIDERS: usize = 2000;
/// Problems and steps listed at most (they grow with the provider apps).
const MAX_LINES: usize = 500;
/// Explanations under way at once; more wait their turn within the read deadline.
pub const MAX_EXPLAINS: usize = 4;

/// The query of `/api/route`.
#[derive(Debug, Default, serde::Deserialize)]
pub struct RouteParams {
    interface: Option<String>,
    group: Option<String>,
    version: Option<String>,
    protocol: Option<String>,
    consumer_app: Option<String>,
    method: Option<String>,
    tag: Option<String>,
    force_tag: Option<bool>,
}

/// What a checked query asks: the subscription and the call.
#[derive(Debug)]
struct Asked {
    subscription: Subscription,
    query: RouteQuery,
}

impl RouteParams {
    /// Checks every parameter; the error names the first bad one.
    fn check(self) -> Result<Asked, String> {
        let fields = [
            ("interface", &self.interface),
            ("group", &self.group),
            ("version", &self.version),
            ("protocol", &self.protocol),
            ("consumer_app", &self.consumer_app),
            ("method", &self.method),
            ("tag", &self.tag),
        ];
        for (name, value) in fields {
            let Some(value) = value else { continue };
            if value.chars().count() > MAX_PARAM_CHARS {
                return Err(format!(
                    "{name} is longer than {MAX_PARAM_CHARS} characters"
                ));
            }
            if value.chars().any(char::is_control) {
                return Err(format!("{name} holds a control character"));
            }
        }
        let given = |v: Option<String>| v.filter(|v| !v.trim().is_empty());
        let interface = given(self.interface).ok_or("interface is required")?;
        let mut subscription = Subscription::new(interface);
        subscription.group = given(self.group);
        subscription.version = given(self.version);
        subscription.protocol = given(self.protocol);
        let consumer_app = given(self.consumer_app);
        if let Some(app) = &consumer_app {
            introspect::model::names::validate_app(app)
                .map_err(|e| format!("consumer_app: {e}"))?;
        }
        let tag = given(self.tag);
        let query = RouteQuery {
            method: given(self.method),
            tag: CallTag::new(
                tag.as_deref().unwrap_or_default(),
                self.force_tag.unwrap_or(false),
            ),
            consumer_app,
            ..RouteQuery::default()
        };
        Ok(Asked {
            subscription,
            query,
        })
    }
}

/// `GET /api/route?interface=IFACE[&group=G&version=V&protocol=P][&consumer_app=APP]
/// [&method=M][&tag=T&force_tag=true]`: see the module docs.
pub async fn route(
    State(shared): State<Shared>,
    query: Result<Query<RouteParams>, QueryRejection>,
) -> Response {
    let asked = match query {
        Ok(Query(params)) => params.check(),
        Err(rejection) => Err(format!("bad query: {}", rejection.body_text())),
    };
    let asked = match asked {
        Ok(asked) => asked,
        Err(reason) => return failure(StatusCode::BAD_REQUEST, &reason),
    };
    let resolver = &shared.fleet.resolver;
    let explained = tokio::time::timeout(READ_TIMEOUT, async {
        // Closed only if the console is torn down mid-request.
        let _turn = shared.explains.acquire().await.ok();
        let subscription = resolver.subscribe(asked.subscription.clone()).await?;
        let report = resolver.explain_route(&subscription, &asked.query).await?;
        let backend = resolver.backend();
        let keys = backend.config().list(DEFAULT_GROUP).await;
        let (_, unread) = readers::report(backend, keys).await;
        let why_empty = report
            .providers
            .is_empty()
            .then(|| subscription.why_empty().map(|why| why.to_string()))
            .flatten();
        let level = subscription.level().to_string();
        Ok::<_, Error>((report, why_empty, unread, level))
    })
    .await;
    let (report, why_empty, unread, level) = match explained {
        Ok(Ok(done)) => done,
        Ok(Err(error)) => return failure(status_of(&error), &error.to_string()),
        Err(_) => {
            return failure(
                StatusCode::GATEWAY_TIMEOUT,
                &format!("no route explanation within {READ_TIMEOUT:?}"),
            );
        }
    };
    let mut value = match serde_json::to_value(&report) {
        Ok(value) => value,
        Err(error) => return failure(StatusCode::INTERNAL_SERVER_ERROR, &error.to_string()),
    };
    value["providers_total"] = json!(report.providers.len());
    value["rules_nobody_reads"] = unread;
    value["level"] = json!(level);
    for (list, most) in [
        ("providers", MAX_PROVIDERS),
        ("problems", MAX_LINES),
        ("notes", MAX_LINES),
        ("steps", MAX_LINES),
        ("rules_in_force", MAX_LINES),
        ("rules_nobody_reads", MAX_LINES),
    ] {
        if let Some(Value::Array(items)) = value.get_mut(list) {
            items.truncate(most);
        }
    }
    value["registry"] = json!(resolver.backend().name());
    value["interface"] = json!(asked.subscription.interface);
    value["method"] = json!(asked.query.method);
    value["force_tag"] = json!(asked.query.tag.force);
    value["tag"] = json!(asked.query.tag.tag.as_deref());
    value["why_empty"] = json!(why_empty);
    answer(value)
}

/// The status an error of the registry read answers with: the caller's fault (a name that
/// is not valid) is a 400, a deadline a 504, anything else the registry's (502).
fn status_of(error: &Error) -> StatusCode {
    match error {
        Error::InvalidName { .. } | Error::Config { .. } => StatusCode::BAD_REQUEST,
        Error::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
        _ => StatusCode::BAD_GATEWAY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> RouteParams {
        let text = pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&");
        from_query(&text)
    }

    /// What axum's `Query` would make of `text`.
    fn from_query(text: &str) -> RouteParams {
        let uri: axum::http::Uri = format!("/api/route?{text}").parse().unwrap();
        Query::<RouteParams>::try_from_uri(&uri).unwrap().0
    }

    #[test]
    fn a_full_query_becomes_the_subscription_and_the_call() {
        let asked = params(&[
            ("interface", "shop.OrderService"),
            ("version", "1.0"),
            ("consumer_app", "shop-web"),
            ("method", "Place"),
            ("tag", "gray"),
            ("force_tag", "true"),
        ])
        .check()
        .unwrap();
        assert_eq!(asked.subscription.interface, "shop.OrderService");
        assert_eq!(asked.subscription.version.as_deref(), Some("1.0"));
        assert_eq!(asked.query.consumer_app.as_deref(), Some("shop-web"));
        assert_eq!(asked.query.method.as_deref(), Some("Place"));
        assert_eq!(asked.query.tag.tag.as_deref(), Some("gray"));
        assert!(asked.query.tag.force);
    }

    #[test]
    fn empty_parameters_are_absent() {
        let asked = params(&[("interface", "S"), ("consumer_app", ""), ("tag", "")])
            .check()
            .unwrap();
        assert_eq!(asked.query.consumer_app, None);
        assert_eq!(asked.query.tag.tag, None);
    }

    #[test]
    fn bad_parameters_are_refused_by_name() {
        let cases: [(&[(&str, &str)], &str); 4] = [
            (&[], "interface is required"),
            (&[("interface", "%20")], "interface is required"),
            (&[("interface", "S"), ("method", "a%0Ab")], "method"),
            (
                &[("interface", "S"), ("consumer_app", "a/b")],
                "consumer_app",
            ),
        ];
        for (pairs, expected) in cases {
            let error = params(pairs).check().unwrap_err();
            assert!(error.contains(expected), "{pairs:?}: {error}");
        }
        let long = "x".repeat(MAX_PARAM_CHARS + 1);
        let error = params(&[("interface", "S"), ("tag", &long)])
            .check()
            .unwrap_err();
        assert!(error.starts_with("tag is longer"), "{error}");
    }
}
