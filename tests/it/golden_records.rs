//! The records real Dubbo peers wrote into etcd, ZooKeeper and Nacos
//! (`tests/it/data/{etcd,zookeeper,nacos}/`, dumped by the `dubbo_java` and `dubbo_go` tests
//! from the running registry), read by Introspect, and compared with what Introspect
//! writes. No peer and no server needed: these run everywhere (with the backend's feature).

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
    let text = std::fs::read_to_string(golden_path("etcd", name)).unwrap();
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
    assert_eq!(&instance.metadata[keys::META_V], "2.0.0");
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

/// The golden dump `name` of registry `kind` (`zookeeper`, `nacos`).
#[cfg(any(feature = "zookeeper", feature = "nacos"))]
fn golden_of(kind: &str, name: &str) -> BTreeMap<String, Value> {
    let text = std::fs::read_to_string(golden_path(kind, name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The one value of `dump` under a key starting with `prefix`, with its key.
#[cfg(any(feature = "zookeeper", feature = "nacos"))]
fn one_under(dump: &BTreeMap<String, Value>, prefix: &str) -> (String, Value) {
    let found: Vec<_> = dump
        .iter()
        .filter(|(key, _)| key.starts_with(prefix))
        .collect();
    assert_eq!(found.len(), 1, "one record under {prefix}: {dump:?}");
    (found[0].0.clone(), found[0].1.clone())
}

/// Checks what a consumer needs of a peer's instance, read back by Introspect.
#[cfg(any(feature = "zookeeper", feature = "nacos"))]
fn check_peer_instance(instance: &ServiceInstance, app: &str, port: u16, revision_len: usize) {
    assert_eq!(
        (
            instance.service_name.as_str(),
            instance.host.as_str(),
            instance.port
        ),
        (app, "127.0.0.1", port)
    );
    assert!(instance.enabled && instance.healthy);
    assert_eq!(instance.revision().len(), revision_len);
    assert_eq!(instance.port_for_protocol("tri"), port);
    let url_params: Value =
        serde_json::from_str(&instance.metadata[keys::METADATA_SERVICE_URL_PARAMS]).unwrap();
    assert_eq!(
        instance.metadata_service_target().unwrap(),
        url_params["port"].as_str().unwrap().parse::<u16>().unwrap()
    );
    assert_eq!(&instance.metadata[keys::META_V], "2.0.0");
}

/// The metadata entries a peer's consumer reads, in the same shape in ours as in theirs.
#[cfg(any(feature = "zookeeper", feature = "nacos"))]
fn check_consumer_entries(ours: &ServiceInstance, theirs: &ServiceInstance) {
    for key in [
        keys::REVISION,
        keys::ENDPOINTS,
        keys::METADATA_SERVICE_URL_PARAMS,
        keys::META_V,
    ] {
        let (mine, theirs) = (&ours.metadata[key], &theirs.metadata[key]);
        if key == keys::METADATA_SERVICE_URL_PARAMS {
            for field in ["port", "protocol", "version"] {
                let value =
                    |json: &str| serde_json::from_str::<Value>(json).unwrap()[field].clone();
                assert_eq!(shape(&value(mine)), shape(&value(theirs)), "{key}.{field}");
            }
        } else {
            let text = |t: &str| shape(&Value::String(t.to_owned()));
            assert_eq!(text(mine), text(theirs), "{key}");
        }
    }
}

/// Our provider's instance, as the embedded store holds it.
#[cfg(any(feature = "zookeeper", feature = "nacos"))]
async fn rust_instance() -> ServiceInstance {
    parse(&rust_record().await)
}

#[cfg(feature = "zookeeper")]
#[tokio::test]
async fn the_zookeeper_reader_and_writer_agree_with_dubbo_java_and_dubbo_go() {
    use introspect::backend::zookeeper::record;
    let limits = Limits::default();
    let ours = rust_instance().await;
    let written: Value = serde_json::from_slice(&record::to_json(&ours, 1)).unwrap();
    for (name, app, revision_len) in [
        ("dubbo-java-provider.json", "dubbo-java-greeter", 32),
        ("dubbo-go-provider.json", "dubbo-go-greeter", 128),
    ] {
        let dump = golden_of("zookeeper", name);
        let (_, theirs) = one_under(&dump, &format!("/services/{app}/"));
        let instance = record::from_json(theirs.to_string().as_bytes(), &limits)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let port = theirs["port"].as_u64().unwrap() as u16;
        check_peer_instance(&instance, app, port, revision_len);
        check_consumer_entries(&ours, &instance);
        // Both write the mapping as the bare app name, as we do.
        assert_eq!(dump["/dubbo/mapping/helloworld.Greeter"], app, "{name}");
        // The Curator record: the fields of ours are Dubbo Java's, of the same types (the
        // payload's metadata aside); dubbo-go writes a subset of them.
        let fields = |record: &Value| -> BTreeMap<String, Value> {
            let mut shaped = shape(record).as_object().unwrap().clone();
            shaped["payload"]["metadata"] = Value::Null;
            shaped.into_iter().collect()
        };
        let (mine, theirs) = (fields(&written), fields(&theirs));
        if app == "dubbo-java-greeter" {
            assert_eq!(mine, theirs, "ours: {written}");
        } else {
            for (field, shaped) in &theirs {
                assert_eq!(mine.get(field), Some(shaped), "{field} in ours: {written}");
            }
        }
    }
    // Dubbo Java's provider also writes its interface's definition for the metadata report
    // (`/dubbo/metadata/{interface}/provider/{app}`), as its consumer does its own; that
    // layout is not a revision's report and the reader never reads it.
    let java = golden_of("zookeeper", "dubbo-java-provider.json");
    assert!(java.contains_key("/dubbo/metadata/helloworld.Greeter/provider/dubbo-java-greeter"));
    assert!(golden_of("zookeeper", "dubbo-go-consumer.json").is_empty());
}

#[cfg(feature = "nacos")]
#[tokio::test]
async fn the_nacos_reader_and_writer_agree_with_dubbo_java_and_dubbo_go() {
    use introspect::backend::nacos::record;
    use nacos_sdk::api::naming::ServiceInstance as NacosInstance;
    let limits = Limits::default();
    let ours = record::to_nacos(&rust_instance().await);
    for (name, app, revision_len) in [
        ("dubbo-java-provider.json", "dubbo-java-greeter", 32),
        ("dubbo-go-provider.json", "dubbo-go-greeter", 128),
    ] {
        let dump = golden_of("nacos", name);
        let (key, theirs) = one_under(&dump, &format!("naming/DEFAULT_GROUP/{app}/"));
        let port: u16 = theirs["metadata"][keys::ENDPOINTS]
            .as_str()
            .and_then(|e| serde_json::from_str::<Value>(e).ok())
            .and_then(|e| e[0]["port"].as_u64())
            .unwrap_or_else(|| panic!("{key}: no endpoint port")) as u16;
        let listed = NacosInstance {
            instance_id: None,
            ip: "127.0.0.1".into(),
            port: i32::from(port),
            weight: theirs["weight"].as_f64().unwrap(),
            healthy: theirs["healthy"].as_bool().unwrap(),
            enabled: theirs["enabled"].as_bool().unwrap(),
            ephemeral: theirs["ephemeral"].as_bool().unwrap(),
            cluster_name: theirs["clusterName"].as_str().map(str::to_owned),
            service_name: Some(app.into()),
            metadata: serde_json::from_value(theirs["metadata"].clone()).unwrap(),
        };
        let instance =
            record::from_nacos(app, &listed, &limits).unwrap_or_else(|e| panic!("{name}: {e}"));
        check_peer_instance(&instance, app, port, revision_len);
        // The instance as registered: ephemeral, weight 1, in the default cluster, as ours.
        assert_eq!(
            (
                listed.ephemeral,
                listed.weight,
                listed.cluster_name.as_deref()
            ),
            (ours.ephemeral, ours.weight, ours.cluster_name.as_deref()),
            "{name}"
        );
        let ours_read = record::from_nacos("rust-greeter", &ours, &limits).unwrap();
        check_consumer_entries(&ours_read, &instance);
        assert_eq!(dump["config/mapping/helloworld.Greeter"], app, "{name}");
    }
}
