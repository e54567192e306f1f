//! The records real Dubbo peers wrote into etcd (`tests/it/data/etcd/`, dumped by the
//! `dubbo_java` and `dubbo_go` tests from the running registry), read by Introspect, and
//! compared with what Introspect writes. No peer needed: these run everywhere.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::support::greeter::start_greeter;
use crate::support::peer_cases::{golden_path, shape};
use introspect::model::keys;
use introspect::{Limits, MemoryStore, ServiceInstance, Store};
use serde_json::Value;

/// The golden dump `name`: every key the peer wrote, with its value.
fn golden(name: &str) -> BTreeMap<String, Value> {
    let text = std::fs::read_to_string(golden_path(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The one instance record of a dump.
fn instance_record(name: &str) -> Value {
    let records: Vec<Value> = golden(name)
        .into_iter()
        .filter(|(key, _)| key.starts_with("/services/") && key.matches('/').count() == 3)
        .map(|(_, value)| value)
        .collect();
    assert_eq!(records.len(), 1, "{name}: one instance record");
    records.into_iter().next().unwrap()
}

fn parse(record: &Value) -> ServiceInstance {
    ServiceInstance::from_json(record.to_string().as_bytes(), &Limits::default())
        .unwrap_or_else(|e| panic!("{e}: {record}"))
}

/// A record as a Rust provider writes it (through the embedded store).
async fn rust_record() -> Value {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let node = start_greeter(&store, "rust-greeter", Duration::from_millis(10)).await;
    let key = format!("/services/rust-greeter/{}", node.address);
    let kv = store.get(&key).await.unwrap().expect("registered");
    node.shutdown().await;
    serde_json::from_slice(&kv.value).unwrap()
}

#[test]
fn the_reader_accepts_a_dubbo_java_record() {
    let record = instance_record("dubbo-java-provider.json");
    let instance = parse(&record);
    let port = record["port"].as_u64().unwrap() as u16;
    assert_eq!(
        (
            instance.service_name.as_str(),
            instance.host.as_str(),
            instance.port
        ),
        ("dubbo-java-greeter", "127.0.0.1", port)
    );
    assert!(instance.enabled && instance.healthy);
    assert_eq!(
        instance.revision().len(),
        32,
        "Java's revisions are MD5 hex"
    );
    assert_eq!(instance.port_for_protocol("tri"), port);
    // Dubbo Java 3.3 with only-use-metadata-v2: url-params say version 2.0.0 themselves.
    let url_params: Value =
        serde_json::from_str(&instance.metadata[keys::METADATA_SERVICE_URL_PARAMS]).unwrap();
    assert_eq!(url_params["version"], "2.0.0");
    assert_eq!(
        instance.metadata_service_target().unwrap(),
        url_params["port"].as_str().unwrap().parse::<u16>().unwrap()
    );
    // No storage type written: local.
    assert!(!instance.metadata.contains_key(keys::STORAGE_TYPE));
}

#[test]
fn the_reader_accepts_a_dubbo_go_record() {
    let record = instance_record("dubbo-go-provider.json");
    let instance = parse(&record);
    let port = record["Port"].as_u64().unwrap() as u16;
    assert_eq!(
        (
            instance.service_name.as_str(),
            instance.host.as_str(),
            instance.port
        ),
        ("dubbo-go-greeter", "127.0.0.1", port)
    );
    assert!(instance.enabled && instance.healthy);
    // dubbo-go 3.3's revisions are 128 hex digits (SHA-512), within the name limit.
    assert_eq!(instance.revision().len(), 128);
    assert_eq!(instance.port_for_protocol("tri"), port);
    // dubbo-go's url-params keep the V1 version; `meta-v` says V2 is served.
    let url_params: Value =
        serde_json::from_str(&instance.metadata[keys::METADATA_SERVICE_URL_PARAMS]).unwrap();
    assert_eq!(url_params["version"], "1.0.0");
    assert_eq!(instance.metadata[keys::META_V], "2.0.0");
    assert_eq!(
        instance.metadata_service_target().unwrap(),
        url_params["port"].as_str().unwrap().parse::<u16>().unwrap()
    );
    // It writes the mapping too (its registry doubles as the metadata report), and no
    // metadata report for storage type local.
    let dump = golden("dubbo-go-provider.json");
    assert_eq!(
        dump["/dubbo/mapping/helloworld.Greeter"],
        "dubbo-go-greeter"
    );
    assert!(
        dump.keys()
            .all(|k| k.starts_with("/services/") || k.starts_with("/dubbo/mapping/"))
    );
}

#[test]
fn a_dubbo_java_consumer_marks_the_app_it_watches_and_the_reader_ignores_it() {
    // Dubbo Java's etcd discovery creates `/services/{app}` (no instance under it) for each
    // app it watches; that key holds no instance.
    let dump = golden("dubbo-java-consumer.json");
    assert_eq!(dump.keys().collect::<Vec<_>>(), ["/services/rust-greeter"]);
    // dubbo-go's consumer writes nothing.
    assert!(golden("dubbo-go-consumer.json").is_empty());
}

#[tokio::test]
async fn the_writer_writes_what_dubbo_java_reads() {
    let ours = rust_record().await;
    let java = instance_record("dubbo-java-provider.json");
    // The same fields, of the same types, at the top (Gson reads DefaultServiceInstance by
    // these names).
    let top = |record: &Value| -> BTreeMap<String, Value> {
        record
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    if k == "metadata" {
                        Value::Null
                    } else {
                        shape(v)
                    },
                )
            })
            .collect()
    };
    assert_eq!(top(&ours), top(&java), "ours: {ours}");
    // Every metadata entry Java's consumer reads, in the same shape.
    for key in [
        keys::REVISION,
        keys::ENDPOINTS,
        keys::METADATA_SERVICE_URL_PARAMS,
        keys::META_V,
    ] {
        let (mine, theirs) = (&ours["metadata"][key], &java["metadata"][key]);
        assert!(mine.is_string(), "{key} in ours: {ours}");
        if key == keys::METADATA_SERVICE_URL_PARAMS {
            // Java reads port and protocol as strings (and the version).
            for field in ["port", "protocol", "version"] {
                let value = |json: &Value| {
                    serde_json::from_str::<Value>(json.as_str().unwrap()).unwrap()[field].clone()
                };
                assert_eq!(shape(&value(mine)), shape(&value(theirs)), "{key}.{field}");
            }
        } else {
            assert_eq!(shape(mine), shape(theirs), "{key}");
        }
    }
}

#[tokio::test]
async fn one_rust_record_reads_for_dubbo_java_and_dubbo_go() {
    // Go's encoding/json matches field names case-insensitively, so dubbo-go reads the
    // camel-case record: each Go field of its DefaultServiceInstance that a consumer uses
    // finds its value. `Enable` has no counterpart (Java's name is `enabled`), so dubbo-go
    // sees `Enable: false` in every Java or Rust record; dubbo-go 3.3 does not consult it on
    // etcd (the dubbo_go test's consumer calls a Rust provider through such a record).
    let ours = rust_record().await;
    let go = instance_record("dubbo-go-provider.json");
    let ours_lower: BTreeMap<String, &Value> = ours
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.to_lowercase(), v))
        .collect();
    for field in ["ServiceName", "Host", "Port", "Healthy", "Metadata"] {
        let mine = ours_lower
            .get(&field.to_lowercase())
            .unwrap_or_else(|| panic!("{field} has no case-insensitive match in {ours}"));
        let theirs = &go[field];
        let shaped = |v: &Value| {
            if field == "Metadata" {
                Value::Null
            } else {
                shape(v)
            }
        };
        assert_eq!(shaped(mine), shaped(theirs), "{field}");
    }
    assert!(!ours_lower.contains_key("enable"));
    // The metadata entries dubbo-go's consumer reads: url-params as a map of strings with
    // protocol and port, and meta-v naming V2.
    let url_params: BTreeMap<String, String> = serde_json::from_str(
        ours["metadata"][keys::METADATA_SERVICE_URL_PARAMS]
            .as_str()
            .unwrap(),
    )
    .expect("url-params: strings only, as dubbo-go decodes them");
    assert!(url_params.contains_key("port") && url_params["protocol"] == "tri");
    assert_eq!(ours["metadata"][keys::META_V], "2.0.0");
    // And Introspect reads both peers' shapes (above) and its own.
    parse(&ours);
}
