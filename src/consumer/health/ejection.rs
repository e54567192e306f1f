//! What health says of an ejected endpoint: why ([`EjectionReason`]), since when, when it
//! is tried again ([`Ejection`]), and where an endpoint stands for the balancer's pick.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

/// Why consumer-side health ejected an endpoint (left it out of the pick).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EjectionReason {
    /// Its connection was refused: nothing listens there.
    Refused,
    /// This many calls in a row failed (transport errors, `UNAVAILABLE`,
    /// `DEADLINE_EXCEEDED`).
    Failing {
        /// The failures in a row.
        consecutive: u32,
    },
    /// Too many of its calls in the window failed.
    FailureRate {
        /// Failed calls in the window.
        failures: u32,
        /// All its calls in the window.
        calls: u32,
    },
    /// One method answers far slower here than at the other endpoints.
    Slow {
        /// Its recent latency here.
        #[serde(serialize_with = "millis")]
        latency: Duration,
        /// The median latency of the endpoints it was compared with.
        #[serde(serialize_with = "millis")]
        median: Duration,
    },
    /// A call waited past the bound and the provider did not answer a liveness check.
    Hung,
    /// A call's connection was lost and the provider did not answer a liveness check on a
    /// new one (it died, or its host went away).
    Lost,
    /// Its instance is held by self-preservation (its record is gone from the registry)
    /// and has not answered a probe yet.
    Held,
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl EjectionReason {
    /// Whether a call to it would fail for sure (refused, failing every call, hung, held):
    /// such endpoints are not capped; outliers (a failure rate, a slow method) are.
    pub fn is_unreachable(&self) -> bool {
        !matches!(
            self,
            EjectionReason::FailureRate { .. } | EjectionReason::Slow { .. }
        )
    }

    /// Whether an answered call brings it back (it proves the endpoint reachable); a
    /// failure rate or a slow method is not undone by one answer.
    pub(crate) fn undone_by_an_answer(&self) -> bool {
        self.is_unreachable()
    }

    /// A short word for metrics and logs.
    pub fn word(&self) -> &'static str {
        match self {
            EjectionReason::Refused => "refused",
            EjectionReason::Failing { .. } => "consecutive_failures",
            EjectionReason::FailureRate { .. } => "failure_rate",
            EjectionReason::Slow { .. } => "slow",
            EjectionReason::Hung => "hung",
            EjectionReason::Lost => "lost",
            EjectionReason::Held => "held",
        }
    }
}

impl std::fmt::Display for EjectionReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EjectionReason::Refused => f.write_str("connection refused"),
            EjectionReason::Failing { consecutive } => {
                write!(f, "{consecutive} calls in a row failed")
            }
            EjectionReason::FailureRate { failures, calls } => write!(
                f,
                "{failures} of its last {calls} calls failed ({}%)",
                u64::from(*failures) * 100 / u64::from((*calls).max(1))
            ),
            EjectionReason::Slow { latency, median } => write!(
                f,
                "answers in {} ms where the others' median is {} ms",
                latency.as_millis(),
                median.as_millis()
            ),
            EjectionReason::Hung => {
                f.write_str("a call waited and the provider did not answer a liveness check")
            }
            EjectionReason::Lost => f.write_str(
                "a call's connection was lost and the provider did not answer a liveness check",
            ),
            EjectionReason::Held => f.write_str(
                "held by self-preservation (gone from the registry) and not answering yet",
            ),
        }
    }
}

/// One endpoint (or one method of it) that health ejected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Ejection {
    /// Its address, `host:port`.
    pub address: String,
    /// The method's path (`/pkg.Service/Method`) when it is ejected for that method alone.
    pub method: Option<String>,
    /// Why.
    pub reason: EjectionReason,
    /// For how long it has been ejected.
    #[serde(serialize_with = "millis", rename = "ejected_for_ms")]
    pub ejected_for: Duration,
    /// When it is tried again (probed, or for a slow method let back on trial); `None`
    /// while its instance is leaving.
    #[serde(serialize_with = "opt_millis", rename = "next_try_in_ms")]
    pub next_try_in: Option<Duration>,
}

fn opt_millis<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => millis(d, s),
        None => s.serialize_none(),
    }
}

impl std::fmt::Display for Ejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.address)?;
        if let Some(method) = &self.method {
            write!(f, " {method}")?;
        }
        write!(
            f,
            ": {} (for {:.1} s",
            self.reason,
            self.ejected_for.as_secs_f64()
        )?;
        match self.next_try_in {
            Some(next) => write!(f, ", tried again in {:.1} s)", next.as_secs_f64()),
            None => f.write_str(", leaving)"),
        }
    }
}

/// Where one endpoint stands for the balancer's pick.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) enum Standing {
    /// It takes calls.
    #[default]
    In,
    /// It cannot be reached (refused, failing every call, hung, held): out while another
    /// endpoint can take the call.
    Out,
    /// An outlier since then (its failure rate): out within the cap.
    Outlier(Instant),
    /// Slow at these methods (paths), each since then: out for them within the cap.
    Slow(Arc<[(Box<str>, Instant)]>),
}

impl Standing {
    /// Whether it is left out of a call of `path` (before the cap), and since when when
    /// the cap may let it back.
    pub fn for_path(&self, path: &str) -> Left {
        match self {
            Standing::In => Left::No,
            Standing::Out => Left::Out,
            Standing::Outlier(since) => Left::Capped(*since),
            Standing::Slow(methods) => methods
                .iter()
                .find(|(p, _)| &**p == path)
                .map_or(Left::No, |&(_, since)| Left::Capped(since)),
        }
    }
}

/// Whether an endpoint is left out of one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Left {
    No,
    /// Out while any other endpoint can take the call.
    Out,
    /// Out as an outlier since then, within the cap.
    Capped(Instant),
}
