//! The JSON shapes that `--json` prints and the console's API serves alike: an endpoint
//! (`resolve`, `watch`), the level a subscription reads, a revision report (`revision`) and a consumers report
//! (`consumers`).

use std::collections::BTreeMap;

use introspect::Endpoint;
use introspect::consumer::MigrationStep;
use introspect::governance::migration::{Level, LevelChoice, StepSource};
use introspect::model::revision_diff::MetadataDiff;
use serde_json::json;

use crate::consumers::ConsumersReport;
use crate::revision::{RevisionReport, RevisionView};

/// An endpoint as JSON: app, host, port, protocol, revision, its service info and the
/// level of discovery it comes from (`application`, or `interface` for a provider URL).
pub fn endpoint_json(e: &Endpoint) -> serde_json::Value {
    json!({
        "app": e.app, "host": e.host, "port": e.port, "protocol": e.protocol,
        "revision": e.revision, "service": &*e.service, "level": level_of(e).as_str(),
    })
}

/// The level of discovery `endpoint` comes from.
pub fn level_of(endpoint: &Endpoint) -> Level {
    if endpoint.is_interface_level() {
        Level::Interface
    } else {
        Level::Application
    }
}

/// Which level a subscription's set comes from, and why, as JSON: the level, the step in
/// force, the migration rule it comes from (`null`: the consumer's own), whether it is
/// `APPLICATION_FIRST`'s fallback, what each level holds (`null`: not read), a rule's move
/// that waits or was refused, and all of it in one sentence (`why`).
pub fn level_json(choice: &LevelChoice) -> serde_json::Value {
    json!({
        "level": choice.level.as_str(),
        "step": choice.step.as_str(),
        "rule": match &choice.source {
            StepSource::Rule(key) => Some(key.as_str()),
            StepSource::Own => None,
        },
        "fallback": choice.is_fallback(),
        "application_endpoints": choice.application,
        "interface_endpoints": choice.interface,
        "pending": choice.pending.map(MigrationStep::as_str),
        "refused": choice.refused.as_ref().map(|(step, why)| json!({"step": step.as_str(), "why": why})),
        "why": choice.to_string(),
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

/// A consumers report as JSON: each consumer subscribing to the interface (its record's
/// fields, the subscription's digest, endpoints, position and times) with the tool's own
/// digest and whether they are the same (`null` when the tool could not resolve it).
pub fn consumers_json(report: &ConsumersReport) -> serde_json::Value {
    let consumers: Vec<serde_json::Value> = report
        .rows
        .iter()
        .map(|row| {
            let s = &row.service;
            json!({
                "app": row.record.app, "id": row.record.id, "host": row.record.host,
                "registeredMs": row.record.registered_ms,
                "group": s.group, "version": s.version, "protocol": s.protocol,
                "endpoints": s.endpoints, "digest": s.digest, "position": s.position,
                "changedMs": s.changed_ms, "currentDigest": row.current, "same": row.same(),
                "rulesDigest": s.rules_digest, "ruleKeys": s.rules,
                "currentRulesDigest": row.current_rules, "rules": row.rules().name(),
            })
        })
        .collect();
    json!({
        "interface": report.interface,
        "consumers": consumers,
        "skipped": report.skipped.iter().map(|(k, r)| json!({"key": k, "reason": r})).collect::<Vec<_>>(),
        "truncated": report.truncated,
    })
}
