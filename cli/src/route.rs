//! What `introspect route` says beyond the library's report: whether every such call
//! fails, and why (`why_empty`), and whether the weights shown are still warming up.

use std::collections::BTreeSet;

use introspect::consumer::RouteReport;

/// Why every call the report explains fails (`None` while a provider is routed): no
/// provider at all (`no_provider`, the subscription's own explanation), or every one routed
/// out, by the distinct reasons the chain gave.
pub fn why_empty(report: &RouteReport, no_provider: Option<String>) -> Option<String> {
    if report.providers.iter().any(|p| p.routed) {
        return None;
    }
    if report.providers.is_empty() {
        return Some(no_provider.unwrap_or_else(|| "the subscription has no provider".into()));
    }
    let reasons: BTreeSet<&str> = report
        .providers
        .iter()
        .filter_map(|p| p.routed_out_by.as_deref())
        .collect();
    let reasons: Vec<&str> = if reasons.is_empty() {
        report.steps.iter().map(String::as_str).collect()
    } else {
        reasons.into_iter().collect()
    };
    let n = report.providers.len();
    let every = if n == 1 {
        "its one provider is"
    } else {
        "all its providers are"
    };
    Some(format!("{every} routed out ({n}): {}", reasons.join("; ")))
}

/// The line that says the WEIGHT column is still warming up, when a provider's effective
/// weight is below its published one (Dubbo ramps a new provider's weight up over its
/// warm-up period): `weights are warming up: published 100/300, effective now 1/3
/// (warm-up 10 min)`.
pub fn warming_up(report: &RouteReport) -> Option<String> {
    let warming: Vec<_> = report
        .providers
        .iter()
        .filter(|p| p.weight < p.published_weight)
        .collect();
    if warming.is_empty() {
        return None;
    }
    let join = |values: Vec<String>| values.join("/");
    let published = join(
        warming
            .iter()
            .map(|p| p.published_weight.to_string())
            .collect(),
    );
    let effective = join(warming.iter().map(|p| p.weight.to_string()).collect());
    let periods: BTreeSet<u32> = warming.iter().map(|p| p.warmup_ms).collect();
    let periods: Vec<String> = periods.into_iter().map(period).collect();
    Some(format!(
        "weights are warming up: published {published}, effective now {effective} (warm-up {})",
        periods.join(", ")
    ))
}

/// A warm-up period as people say it: `10 min`, `90 s`, `1500 ms`.
fn period(ms: u32) -> String {
    match ms {
        ms if ms >= 60_000 && ms % 60_000 == 0 => format!("{} min", ms / 60_000),
        ms if ms % 1_000 == 0 => format!("{} s", ms / 1_000),
        ms => format!("{ms} ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_read_as_people_say_them() {
        assert_eq!(period(600_000), "10 min");
        assert_eq!(period(90_000), "90 s");
        assert_eq!(period(1_500), "1500 ms");
    }
}
