//! A translation in words: what a client is sent for a service and which rule produced
//! each route, cluster and weight (`introspect xds --explain`).

use std::fmt;

use super::classes::Matcher;
use super::{RoutePlan, Translation};

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Matcher::Method(m) => write!(f, "method {m}"),
            Matcher::Header(name, value) => write!(f, "header {name} = {value}"),
            Matcher::HeaderTrue(name) => write!(f, "header {name} = true"),
            Matcher::Absent(name) => write!(f, "no header {name}"),
        }
    }
}

fn matches(route: &RoutePlan) -> String {
    if route.matchers.is_empty() {
        return "any other call".to_owned();
    }
    route
        .matchers
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Translation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "service {}", self.service)?;
        let app = if self.consumer.app.is_empty() {
            "(none)"
        } else {
            self.consumer.app.as_str()
        };
        writeln!(
            f,
            "routed as the consumer: app {app} on host {}",
            self.consumer.host
        )?;
        if !self.reads_consumer.is_empty() {
            writeln!(
                f,
                "per client: the rules read the consumer's {}; a client whose node says \
                 otherwise is routed as it says",
                self.reads_consumer.join(", ")
            )?;
        }
        if self.rules_in_force.is_empty() {
            writeln!(f, "rules in force: none")?;
        } else {
            writeln!(f, "rules in force: {}", self.rules_in_force.join(", "))?;
        }
        for problem in &self.problems {
            writeln!(f, "rule not applied: {problem}")?;
        }
        writeln!(
            f,
            "routes (RouteConfiguration {}, tried in order):",
            self.service
        )?;
        for (i, route) in self.routes.iter().enumerate() {
            writeln!(f, "  {}. {}", i + 1, matches(route))?;
            let empty = |name: &str| self.cluster(name).is_none_or(|c| c.members.is_empty());
            match route.destinations.as_slice() {
                [(cluster, _)] if empty(cluster) => writeln!(
                    f,
                    "     -> cluster {cluster}: no provider, every call fails (UNAVAILABLE)"
                )?,
                [(cluster, _)] => writeln!(f, "     -> cluster {cluster}")?,
                many => {
                    let total: u64 = many.iter().map(|(_, w)| u64::from(*w)).sum();
                    for (cluster, weight) in many {
                        writeln!(
                            f,
                            "     -> cluster {cluster}, weight {weight} of {total} \
                             (weighted_clusters)"
                        )?;
                    }
                }
            }
            writeln!(
                f,
                "     retries {}, timeout {}: {}",
                route.policy.retries,
                route
                    .policy
                    .timeout
                    .map_or_else(|| "none".to_owned(), |t| format!("{} ms", t.as_millis())),
                route.policy.from
            )?;
            for step in &route.why {
                writeln!(f, "     because {step}")?;
            }
        }
        writeln!(f, "clusters (CDS and EDS):")?;
        for cluster in &self.clusters {
            writeln!(
                f,
                "  {} (loadbalance {}):",
                cluster.name, cluster.loadbalance
            )?;
            if cluster.members.is_empty() {
                writeln!(f, "     no provider")?;
            }
            for m in &cluster.members {
                let mut notes = Vec::new();
                if m.warming {
                    notes.push(format!("warming up to {}", m.published_weight));
                }
                for (k, v) in &m.configured {
                    notes.push(format!("configured {k}={v}"));
                }
                let notes = if notes.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", notes.join(", "))
                };
                writeln!(
                    f,
                    "     {}:{} app {} weight {}{notes}",
                    m.host, m.port, m.app, m.weight
                )?;
            }
        }
        let o = &self.outliers;
        writeln!(
            f,
            "outlier detection: {} consecutive failures (Envoy), {}% failing of at least {} \
             calls per {} ms, ejected {} ms at first, at most {}% of a cluster",
            o.consecutive_failures,
            o.failure_percent,
            o.min_calls,
            o.interval.as_millis(),
            o.base_ejection.as_millis(),
            o.max_ejection_percent
        )?;
        if self.unexpressed.is_empty() {
            writeln!(f, "not expressed: nothing")?;
        }
        for note in &self.unexpressed {
            writeln!(f, "not expressed: {note}")?;
        }
        Ok(())
    }
}
