//! Tables for people, JSON for scripts.

use std::collections::{BTreeMap, BTreeSet};

use introspect::backend::{InstanceList, Instances};
use introspect::{Endpoint, MetadataInfo};
use serde_json::json;
use std::fmt::Write as _;
use std::io::{self, Write as _};

use introspect::governance::migration::LevelChoice;
use introspect_cli::consumers::{ConsumersReport, age};
use introspect_cli::json::{
    consumers_json, endpoint_json, level_json, level_of, revision_report_json,
};
use introspect_cli::revision::RevisionReport;

/// Prints results as tables or as JSON.
pub struct Output {
    json: bool,
    started: std::time::Instant,
}

impl Output {
    pub fn new(json: bool) -> Self {
        Output {
            json,
            started: std::time::Instant::now(),
        }
    }

    /// Writes `value` as JSON, or the table `table` writes.
    fn emit(&self, value: serde_json::Value, table: impl FnOnce(&mut String)) -> io::Result<()> {
        let mut t = String::new();
        if self.json {
            let _ = writeln!(
                t,
                "{}",
                serde_json::to_string_pretty(&value).unwrap_or_default()
            );
        } else {
            table(&mut t);
        }
        write_out(&t)
    }

    /// Writes `value` as JSON, or `text` as it is.
    pub fn show(&self, value: serde_json::Value, text: &str) -> io::Result<()> {
        self.emit(value, |t| t.push_str(text))
    }

    pub fn apps(&self, apps: &BTreeMap<String, InstanceList>) -> io::Result<()> {
        let revisions = |instances: &Instances| -> BTreeMap<String, usize> {
            let mut counts = BTreeMap::new();
            for i in instances.values() {
                *counts.entry(i.revision().to_owned()).or_default() += 1;
            }
            counts
        };
        let value = apps
            .iter()
            .map(|(app, list)| json!({"app": app, "instances": list.instances.len(), "revisions": revisions(&list.instances)}))
            .collect();
        self.emit(value, |t| {
            let _ = writeln!(t, "{:<24} {:>9}  REVISIONS", "APP", "INSTANCES");
            for (app, list) in apps {
                let instances = &list.instances;
                let revs: Vec<String> = revisions(instances)
                    .iter()
                    .map(|(r, n)| format!("{}×{n}", short(r)))
                    .collect();
                let _ = writeln!(t, "{:<24} {:>9}  {}", app, instances.len(), revs.join(", "));
            }
        })
    }

    pub fn instances(&self, list: &InstanceList) -> io::Result<()> {
        let value = json!({
            "instances": list.instances.values().map(|i| serde_json::to_value(&**i).unwrap_or_default()).collect::<Vec<_>>(),
            "skipped": list.skipped.iter().map(|(k, r)| json!({"address": k, "reason": r})).collect::<Vec<_>>(),
        });
        self.emit(value, |t| {
            let _ = writeln!(
                t,
                "{:<28} {:<8} {:<14} {:<8} {:>13}",
                "ADDRESS", "ENABLED", "REVISION", "STORAGE", "METADATA PORT"
            );
            for i in list.instances.values() {
                let _ = writeln!(
                    t,
                    "{:<28} {:<8} {:<14} {:<8} {:>13}",
                    i.key_address(),
                    i.enabled,
                    short(i.revision()),
                    i.storage_type().as_str(),
                    i.metadata_service_port()
                );
            }
            for (address, reason) in &list.skipped {
                let _ = writeln!(t, "skipped {address}: {reason}");
            }
        })
    }

    pub fn metadata(&self, info: &MetadataInfo) -> io::Result<()> {
        self.emit(serde_json::to_value(info).unwrap_or_default(), |t| {
            let _ = writeln!(t, "app {}  revision {}", info.app, info.revision);
            let instance_port = info.services.values().any(|s| s.port == 0);
            let _ = writeln!(
                t,
                "{:<48} {:>6}  {:<24} PARAMS",
                "MATCH KEY", "PORT", "PATH"
            );
            for (key, s) in &info.services {
                // Port 0: the service is served on the instance's own port.
                let port = match s.port {
                    0 => "-".to_owned(),
                    port => port.to_string(),
                };
                let _ = writeln!(t, "{:<48} {:>6}  {:<24} {:?}", key, port, s.path, s.params);
            }
            if instance_port {
                let _ = writeln!(t, "(PORT -: served on each instance's own port)");
            }
        })
    }

    pub fn mapping(&self, interface: &str, apps: &BTreeSet<String>) -> io::Result<()> {
        self.emit(json!({"interface": interface, "apps": apps}), |t| {
            for app in apps {
                let _ = writeln!(t, "{app}");
            }
        })
    }

    pub fn endpoints(&self, endpoints: &[Endpoint]) -> io::Result<()> {
        let value = endpoints.iter().map(endpoint_json).collect();
        self.emit(value, |t| {
            let _ = writeln!(
                t,
                "{:<20} {:<28} {:<6} {:<14} SERVICE",
                "APP", "ADDRESS", "PROTO", "REVISION"
            );
            for e in endpoints {
                let _ = writeln!(
                    t,
                    "{:<20} {:<28} {:<6} {:<14} {}",
                    e.app,
                    e.address(),
                    e.protocol,
                    short(&e.revision),
                    e.service.match_key()
                );
            }
            let _ = writeln!(t, "{} endpoints", endpoints.len());
        })
    }
}

impl Output {
    /// What a subscription reading the interface level resolves to: the endpoints in use
    /// (JSON: only those, each with its `level`), the other level's beside them (tables
    /// only), and which level is used and why (on standard error with `--json`).
    pub fn levels(
        &self,
        choice: &LevelChoice,
        in_use: &[Endpoint],
        standing_by: &[Endpoint],
    ) -> io::Result<()> {
        if self.json {
            let _ = writeln!(io::stderr(), "level: {choice}");
        }
        let value = in_use.iter().map(endpoint_json).collect();
        self.emit(value, |t| {
            let _ = writeln!(
                t,
                "{:<22} {:<20} {:<28} {:<6} {:<14} SERVICE",
                "LEVEL", "APP", "ADDRESS", "PROTO", "REVISION"
            );
            let rows = in_use
                .iter()
                .map(|e| (e, ""))
                .chain(standing_by.iter().map(|e| (e, " (standby)")));
            for (e, mark) in rows {
                let _ = writeln!(
                    t,
                    "{:<22} {:<20} {:<28} {:<6} {:<14} {}",
                    format!("{}{mark}", level_of(e)),
                    e.app,
                    e.address(),
                    e.protocol,
                    short(&e.revision),
                    e.service.match_key()
                );
            }
            let _ = writeln!(
                t,
                "{} endpoints in use, {} standing by",
                in_use.len(),
                standing_by.len()
            );
            let _ = writeln!(t, "level: {choice}");
        })
    }

    /// A line saying which level a watched subscription's set now comes from, and why.
    pub fn level_change(&self, choice: &LevelChoice) -> io::Result<()> {
        let now = self.started.elapsed().as_secs_f64();
        let line = if self.json {
            json!({"seconds": now, "level": level_json(choice)}).to_string()
        } else {
            format!("[+{now:.3}s] level: {choice}")
        };
        write_out(&format!("{line}\n"))
    }

    /// One line per endpoint that came or went since `before`, with a timestamp.
    pub fn changes(
        &self,
        before: &[Endpoint],
        after: &[Endpoint],
        protection_active: bool,
    ) -> io::Result<()> {
        let (old, new): (BTreeSet<&Endpoint>, BTreeSet<&Endpoint>) =
            (before.iter().collect(), after.iter().collect());
        let added: Vec<&Endpoint> = new.difference(&old).copied().collect();
        let removed: Vec<&Endpoint> = old.difference(&new).copied().collect();
        let now = self.started.elapsed().as_secs_f64();
        let mut t = String::new();
        if self.json {
            let line = json!({
                "seconds": now,
                "total": after.len(),
                "protection_active": protection_active,
                "added": added.iter().map(|e| endpoint_json(e)).collect::<Vec<_>>(),
                "removed": removed.iter().map(|e| endpoint_json(e)).collect::<Vec<_>>(),
            });
            let _ = writeln!(t, "{line}");
            return write_out(&t);
        }
        let protection = if protection_active {
            " (self-preservation holding removals)"
        } else {
            ""
        };
        let _ = writeln!(t, "[+{now:.3}s] {} endpoints{protection}", after.len());
        for e in added {
            let _ = writeln!(
                t,
                "  + {:<20} {:<28} {}{}",
                e.app,
                e.address(),
                e.service.match_key(),
                interface_mark(e)
            );
        }
        for e in removed {
            let _ = writeln!(
                t,
                "  - {:<20} {:<28} {}{}",
                e.app,
                e.address(),
                e.service.match_key(),
                interface_mark(e)
            );
        }
        write_out(&t)
    }
}

/// Writes `text` to standard output at once. A closed pipe (`| head`) comes back as an
/// error of kind [`io::ErrorKind::BrokenPipe`], which the caller takes as "stop quietly".
fn write_out(text: &str) -> io::Result<()> {
    let mut stdout = io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()
}

/// ` (interface level)` after an endpoint from a provider URL, nothing otherwise.
fn interface_mark(endpoint: &Endpoint) -> &'static str {
    if endpoint.is_interface_level() {
        " (interface level)"
    } else {
        ""
    }
}

fn short(revision: &str) -> &str {
    revision.get(..12).unwrap_or(revision)
}

impl Output {
    /// Each revision's canonical forms, and how the later revisions differ from the first.
    pub fn revisions(&self, report: &RevisionReport) -> io::Result<()> {
        let value = revision_report_json(report);
        self.emit(value, |t| {
            for view in &report.revisions {
                let declared = if view.declared_rules.is_empty() {
                    "none".to_owned()
                } else {
                    view.declared_rules
                        .iter()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let _ = writeln!(
                    t,
                    "app {}  revision {}  instances {}  declared rule {}",
                    report.app, view.revision, view.instances, declared
                );
                match &view.fetched {
                    Err(e) => {
                        let _ = writeln!(t, "  metadata unavailable: {e}");
                    }
                    Ok((_, forms)) => {
                        // A rule the instances do not use is shown for comparison: not
                        // giving the revision is no failure there. With no rule declared,
                        // any may be theirs, so only none giving it is.
                        let none_matches = !forms.iter().any(|f| f.matches_claimed);
                        for form in forms {
                            let theirs = view.declared_rules.contains(form.rule.name())
                                || (view.declared_rules.is_empty() && none_matches);
                            let verdict = if form.matches_claimed {
                                "matches"
                            } else if theirs {
                                "MISMATCH"
                            } else {
                                "unused"
                            };
                            let _ = writeln!(
                                t,
                                "  {:<10} {:<8} {}",
                                form.rule.name(),
                                verdict,
                                form.revision
                            );
                            let _ = writeln!(
                                t,
                                "    {}",
                                form.canonical.as_deref().unwrap_or("(exports nothing)")
                            );
                        }
                    }
                }
            }
            for (from, to, d) in &report.diffs {
                let _ = writeln!(t, "{} -> {}", short(from), short(to));
                if d.is_empty() {
                    let _ = writeln!(
                        t,
                        "  same services and params: the revisions come from different rules"
                    );
                }
                if d.app_changed {
                    let _ = writeln!(t, "  ~ app name");
                }
                for key in &d.only_before {
                    let _ = writeln!(t, "  - {key}  (only in {})", short(from));
                }
                for key in &d.only_after {
                    let _ = writeln!(t, "  + {key}  (only in {})", short(to));
                }
                for (key, changes) in &d.changed {
                    for c in changes {
                        let _ = writeln!(
                            t,
                            "  ~ {key}  {}: {} -> {}",
                            c.field,
                            c.before.as_deref().unwrap_or("(absent)"),
                            c.after.as_deref().unwrap_or("(absent)")
                        );
                    }
                }
            }
        })
    }
}

impl Output {
    /// The consumers subscribing to an interface, each digest compared with the tool's, and
    /// the rules each routes by with those written now.
    pub fn consumers(&self, report: &ConsumersReport) -> io::Result<()> {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.emit(consumers_json(report), |t| {
            let _ = writeln!(
                t,
                "{:<22} {:<20} {:<12} {:>8} {:>9}  {:<16} {:>10}  {:<9}  RULES",
                "HOST", "APP", "ID", "UP", "ENDPOINTS", "DIGEST", "POSITION", "VS NOW"
            );
            for row in &report.rows {
                let s = &row.service;
                let verdict = match row.same() {
                    Some(true) => "same",
                    Some(false) => "different",
                    None => "unknown",
                };
                let _ = writeln!(
                    t,
                    "{:<22} {:<20} {:<12} {:>8} {:>9}  {:<16} {:>10}  {verdict:<9}  {}",
                    row.record.host,
                    row.record.app,
                    row.record.id.get(..12).unwrap_or(&row.record.id),
                    age(row.record.registered_ms, now_ms),
                    s.endpoints,
                    s.digest,
                    s.position,
                    row.rules().name(),
                );
            }
            for (key, reason) in &report.skipped {
                let _ = writeln!(t, "skipped {key}: {reason}");
            }
            if report.truncated {
                let _ = writeln!(t, "(more consumer records than were read)");
            }
        })
    }
}

impl Output {
    /// Where a call would go: each provider, routed or not and why, and the rules; with
    /// `unread`, the rules present that no known member reads (a line, and the JSON field
    /// `rules_nobody_reads`: `null` when the registry could not be asked); `level` says which
    /// discovery level the providers come from and why (`level`); `why_empty`, why every
    /// such call fails (`null` while a provider is routed), and `warming`, the line saying
    /// the weights shown are still warming up.
    pub fn route(
        &self,
        report: &introspect::consumer::RouteReport,
        unread: &(Option<String>, serde_json::Value),
        level: &str,
        why_empty: Option<&str>,
        warming: Option<String>,
    ) -> io::Result<()> {
        let mut value = serde_json::to_value(report).unwrap_or_default();
        value["rules_nobody_reads"] = unread.1.clone();
        value["level"] = serde_json::Value::String(level.to_owned());
        value["why_empty"] = json!(why_empty);
        self.emit(value, |t| {
            let _ = writeln!(
                t,
                "{:<24} {:<20} {:<8} {:>6}  {:<8} ROUTED",
                "PROVIDER", "APP", "TAG", "WEIGHT", "ENABLED"
            );
            for p in &report.providers {
                let routed = match &p.routed_out_by {
                    None if p.routed && p.set_aside => "yes, but set aside by health".to_owned(),
                    None if p.routed => "yes".to_owned(),
                    None => "no".to_owned(),
                    Some(why) => format!("no: {why}"),
                };
                let _ = writeln!(
                    t,
                    "{:<24} {:<20} {:<8} {:>6}  {:<8} {routed}",
                    p.address,
                    p.app,
                    p.tag.as_deref().unwrap_or("-"),
                    p.weight,
                    if p.enabled { "yes" } else { "no" },
                );
                for (key, value) in &p.configured {
                    let _ = writeln!(t, "  configured: {key}={value}");
                }
                for bad in &p.bad_params {
                    let _ = writeln!(t, "  unparsed, read as default: {bad}");
                }
                if let Some(ejection) = &p.ejection {
                    let _ = writeln!(t, "  ejected: {ejection}");
                }
            }
            let in_force = if report.rules_in_force.is_empty() {
                "none".to_owned()
            } else {
                report.rules_in_force.join(", ")
            };
            if let Some(line) = warming {
                let _ = writeln!(t, "{line}");
            }
            if let Some(why) = why_empty {
                let _ = writeln!(t, "every such call fails: {why}");
            }
            let _ = writeln!(t, "level: {level}");
            let _ = writeln!(t, "rules in force: {in_force}");
            if let Some(line) = &unread.0 {
                let _ = writeln!(t, "{line}");
            }
            for problem in &report.problems {
                let _ = writeln!(t, "not applied: {}: {}", problem.key, problem.reason);
            }
            for note in &report.notes {
                let _ = writeln!(t, "noted: {}: {}", note.key, note.reason);
            }
            for step in &report.steps {
                let _ = writeln!(t, "step: {step}");
            }
            if let Some(call) = &report.call {
                let _ = writeln!(
                    t,
                    "call: cluster {} ({}), retries {} ({}; {} tries), loadbalance {} ({}), \
                     timeout {} ({})",
                    call.cluster.value,
                    call.cluster.from,
                    call.retries.value,
                    call.retries.from,
                    call.tries,
                    call.loadbalance.value,
                    call.loadbalance.from,
                    match call.timeout.value.as_str() {
                        "none" => "none".to_owned(),
                        ms => format!("{ms} ms"),
                    },
                    call.timeout.from,
                );
                let _ = writeln!(t, "retried: {}", call.retried);
                for not_applied in &call.not_applied {
                    let _ = writeln!(t, "not applied: {not_applied}");
                }
            }
        })
    }
}
