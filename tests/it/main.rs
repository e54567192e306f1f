//! The integration tests, one binary: each module is one area of guarantees, and `support`
//! holds what they share (real servers on loopback, fleets, callers, hostile peers).
//! One binary links the library and the support code once, instead of once per file.

mod support;

mod backend_conformance;
mod channel;
mod conformance;
mod consumer_records;
mod deadlines;
mod dubbo_go;
mod dubbo_java;
mod early_fetches;
mod end_to_end;
mod etcd_auth;
mod etcd_cluster;
mod etcd_connect;
mod etcd_consumer;
mod etcd_faults;
mod etcd_health;
mod etcd_paging;
mod etcd_start_down;
#[cfg(feature = "zookeeper")]
mod failover;
mod fault_proxy;
mod first_set;
mod flags;
mod follow_app;
mod generated_code;
mod golden_records;
#[cfg(feature = "zookeeper")]
mod governance;
#[cfg(any(feature = "zookeeper", feature = "nacos"))]
mod governance_rules;
mod health_and_snapshot;
mod held_endpoints;
mod identity;
mod interface_level;
mod interop;
mod late_metadata;
mod limits;
mod mapping_integrity;
mod metrics;
#[cfg(feature = "nacos")]
mod nacos;
mod names;
mod no_hanging_calls;
mod outliers;
mod parser_properties;
mod partitions;
mod passive_health;
mod provider;
mod provider_rules;
#[cfg(feature = "zookeeper")]
mod quickstart;
mod quiet_logs;
mod readme;
mod reflection;
mod retries;
mod revision;
mod revision_rules;
mod rules;
mod rules_digest;
mod shared_health;
mod shared_views;
mod sigterm;
mod subscriptions;
mod tls;
mod verification;
#[cfg(feature = "zookeeper")]
mod zookeeper;
