//! The JSON shapes that `--json` prints and the console's API serves alike: an endpoint
//! (`resolve`, `watch`) and a revision report (`revision`).

use std::collections::BTreeMap;

use introspect::Endpoint;
use introspect::model::revision_diff::MetadataDiff;
use serde_json::json;

use crate::revision::{RevisionReport, RevisionView};

/// An endpoint as JSON: app, host, port, protocol, revision and its service info.
pub fn endpoint_json(e: &Endpoint) -> serde_json::Value {
    json!({
        "app": e.app, "host": e.host, "port": e.port, "protocol": e.protocol,
        "revision": e.revision, "service": &*e.service,
    })
}

/// A revision report as JSON: each revision's canonical forms under every rule (or why its
/// metadata could not be had), and how the later revisions differ from the first.
pub fn revision_report_json(report: &RevisionReport) -> serde_json::Value {
    json!({
        "app": report.app,
        "revisions": report.revisions.iter().map(revision_json).collect::<Vec<_>>(),
        "diffs": report.diffs.iter().map(|(from, to, d)| diff_json(from, to, d)).collect::<Vec<_>>(),
    })
}

fn revision_json(view: &RevisionView) -> serde_json::Value {
    let mut value = json!({
        "revision": view.revision,
        "instances": view.instances,
        "declared_rules": view.declared_rules,
    });
    match &view.fetched {
        Ok((_, forms)) => {
            value["rules"] = forms
                .iter()
                .map(|f| {
                    json!({
                        "rule": f.rule.name(),
                        "revision": f.revision,
                        "matches_claimed": f.matches_claimed,
                        "canonical": f.canonical,
                    })
                })
                .collect();
        }
        Err(e) => value["error"] = json!(e.to_string()),
    }
    value
}

/// How two revisions differ, as JSON.
pub fn diff_json(from: &str, to: &str, d: &MetadataDiff) -> serde_json::Value {
    let changed: BTreeMap<&String, Vec<serde_json::Value>> = d
        .changed
        .iter()
        .map(|(key, changes)| {
            let fields = changes
                .iter()
                .map(|c| json!({"field": c.field, "before": c.before, "after": c.after}))
                .collect();
            (key, fields)
        })
        .collect();
    json!({
        "from": from,
        "to": to,
        "app_changed": d.app_changed,
        "only_in_from": d.only_before,
        "only_in_to": d.only_after,
        "changed": changed,
    })
}
