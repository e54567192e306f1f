//! The interop cases, the same for every real peer and registry: a Rust consumer calling
//! a peer's provider, a peer's consumer calling a Rust provider, and what each side wrote
//! into the registry (compared with the golden records in `tests/it/data/`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use introspect::consumer::SubscriptionHandle;
use introspect::{ResolverStats, Store, Subscription};
use serde_json::Value;

use super::greeter::pb::HelloRequest;
use super::greeter::pb::greeter_client::GreeterClient;
use super::peers::{BuiltPeer, ConsumerRun};
use super::wait::eventually;

/// The interface every side exports or calls.
pub const INTERFACE: &str = "helloworld.Greeter";
/// Calls each case makes once discovery is done.
pub const CALLS: u64 = 50;

/// What a Rust consumer's calls through the balanced channel gave.
pub struct Calls {
    /// Calls answered.
    pub ok: u64,
    /// Calls failed (each error listed in `errors`).
    pub failed: u64,
    /// The last answer.
    pub message: String,
    /// The errors seen.
    pub errors: Vec<String>,
}

/// Waits until the subscription holds at least one endpoint.
pub async fn wait_for_endpoints(subscription: &SubscriptionHandle, what: &str) {
    eventually(Duration::from_secs(30), what, || {
        let found = !subscription.current().is_empty();
        async move { found }
    })
    .await;
}

/// Makes `calls` calls of `SayHello` through a balanced channel over `subscription`.
pub async fn call_through(
    resolver: &introspect::Resolver,
    subscription: &SubscriptionHandle,
    calls: u64,
) -> Calls {
    let (channel, _handle) = resolver.balanced_channel(subscription).unwrap();
    let mut client = GreeterClient::new(channel);
    let mut outcome = Calls {
        ok: 0,
        failed: 0,
        message: String::new(),
        errors: Vec::new(),
    };
    for i in 0..calls {
        let mut request = tonic::Request::new(HelloRequest {
            name: format!("rust-{i}"),
        });
        request.set_timeout(Duration::from_secs(3));
        match tokio::time::timeout(Duration::from_secs(5), client.say_hello(request)).await {
            Ok(Ok(reply)) => {
                outcome.ok += 1;
                outcome.message = reply.into_inner().message;
            }
            Ok(Err(status)) => {
                outcome.failed += 1;
                outcome.errors.push(status.to_string());
            }
            Err(_) => {
                outcome.failed += 1;
                outcome.errors.push("call timed out".into());
            }
        }
    }
    outcome
}

/// Checks a Rust consumer's calls: all answered by the peer, none failed.
pub fn assert_all_answered(calls: &Calls, suffix: &str, stats: &ResolverStats) {
    assert_eq!(
        (calls.ok, calls.failed),
        (CALLS, 0),
        "calls made and failed; errors: {:?}; stats: {stats:?}",
        calls.errors
    );
    assert!(
        calls.message.ends_with(suffix),
        "answered by the peer: {:?}",
        calls.message
    );
}

/// Checks a peer consumer's run: every call answered, by the Rust provider, which counted
/// exactly the calls the peer made (its first, discovering, answer and the `CALLS` after).
pub fn assert_peer_run(run: &ConsumerRun, served: u64) {
    assert!(
        run.status.success() && (run.calls, run.ok, run.failed) == (CALLS, CALLS, 0),
        "the peer consumer's calls (made, ok, failed) = ({}, {}, {}), exit {}:\n{}",
        run.calls,
        run.ok,
        run.failed,
        run.status,
        run.output
    );
    assert!(
        run.message.starts_with("Hello ") && run.message.contains(" from 127.0.0.1:"),
        "answered by the Rust greeter: {:?}",
        run.message
    );
    assert_eq!(served, CALLS + 1, "calls the Rust provider answered");
}

/// Every key of the store with its value, ports of this run replaced by names, so that runs
/// compare equal.
pub async fn dump(store: &Arc<dyn Store>, ports: &[(u16, &str)]) -> BTreeMap<String, Value> {
    let range = store.get_prefix("/").await.expect("store answers");
    let mut keys = BTreeMap::new();
    for kv in range.kvs {
        let text = String::from_utf8_lossy(&kv.value).into_owned();
        let value = serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text));
        keys.insert(normalize(&kv.key, ports), value);
    }
    keys
}

fn normalize(text: &str, ports: &[(u16, &str)]) -> String {
    let mut text = text.to_owned();
    for (port, name) in ports {
        text = text.replace(&port.to_string(), &format!("{{{name}}}"));
    }
    text
}

/// What a peer consumer wrote: `written` without the keys the Rust provider of `app`
/// writes (its instances, the registry's epoch and the mapping keys in `mappings`).
pub fn written_by_peer(
    written: BTreeMap<String, Value>,
    app: &str,
    mappings: impl Fn(&str) -> bool,
) -> BTreeMap<String, Value> {
    let instances = format!("/services/{app}/");
    written
        .into_iter()
        .filter(|(key, _)| !key.starts_with(&instances))
        .filter(|(key, _)| !key.starts_with("/introspect/"))
        .filter(|(key, _)| !mappings(key))
        .collect()
}

/// The file of a golden record.
pub fn golden_path(name: &str) -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/data/etcd")
        .join(name)
}

/// Compares what a peer wrote (`keys`, from [`dump`]) with its golden record `name`: the
/// same keys, and each value of the same shape (field names and JSON types, recursively,
/// also inside the JSON that metadata values hold). Values themselves (revisions,
/// timestamps, ports) may differ. `INTROSPECT_UPDATE_GOLDEN=1` rewrites the file instead.
pub fn check_golden(name: &str, keys: &BTreeMap<String, Value>) {
    let path = golden_path(name);
    let written = serde_json::to_string_pretty(keys).unwrap() + "\n";
    if std::env::var_os("INTROSPECT_UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&path, written).unwrap();
        eprintln!("golden record {} rewritten", path.display());
        return;
    }
    let golden: BTreeMap<String, Value> = serde_json::from_str(
        &std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("golden record {}: {e}", path.display())),
    )
    .unwrap();
    let shapes = |keys: &BTreeMap<String, Value>| -> BTreeMap<String, Value> {
        keys.iter().map(|(k, v)| (k.clone(), shape(v))).collect()
    };
    assert_eq!(
        shapes(keys),
        shapes(&golden),
        "what the peer wrote differs in shape from {} (INTROSPECT_UPDATE_GOLDEN=1 rewrites \
         it); written:\n{written}",
        path.display()
    );
}

/// The shape of a JSON value: objects keep their keys, strings holding JSON objects or
/// arrays are shaped too, other values become their type's name.
pub fn shape(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), shape(v))).collect())
        }
        Value::Array(items) => Value::Array(items.first().map(shape).into_iter().collect()),
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(inner @ (Value::Object(_) | Value::Array(_))) => {
                serde_json::json!({ "json": shape(&inner) })
            }
            _ => Value::String("string".into()),
        },
        Value::Number(_) => Value::String("number".into()),
        Value::Bool(_) => Value::String("bool".into()),
        Value::Null => Value::String("null".into()),
    }
}

/// Waits until `key` is in the store.
pub async fn wait_for_key(store: &Arc<dyn Store>, key: &str, what: &str) {
    eventually(Duration::from_secs(30), what, || async {
        store.get(key).await.ok().flatten().is_some()
    })
    .await;
}

/// Waits until the mapping of [`INTERFACE`] names `app`.
pub async fn wait_for_mapping(store: &Arc<dyn Store>, app: &str) {
    let key = format!("/dubbo/mapping/{INTERFACE}");
    eventually(
        Duration::from_secs(30),
        "the mapping to name the app",
        || async {
            store.get(&key).await.ok().flatten().is_some_and(|kv| {
                String::from_utf8_lossy(&kv.value)
                    .split(',')
                    .any(|a| a == app)
            })
        },
    )
    .await;
}

/// The subscription a Rust consumer makes for a peer's provider: through the mapping, or
/// naming the app where the peer writes no mapping.
pub fn subscription(provided_by: Option<&str>) -> Subscription {
    let wanted = Subscription::new(INTERFACE);
    match provided_by {
        Some(app) => wanted.provided_by([app.to_owned()]),
        None => wanted,
    }
}

/// Runs `peer`'s consumer against a Rust provider already registered.
pub async fn run_peer_consumer(
    peer: &BuiltPeer,
    registry: &str,
    provided_by: Option<&str>,
) -> ConsumerRun {
    let app = format!("{}-consumer", peer.peer().name());
    peer.consumer(registry, &app, CALLS as u32, provided_by)
        .await
}
