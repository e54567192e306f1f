//! Why a subscription resolves to nothing, in words a person can act on. Pure: built from
//! what a resolve or a subscription already read.
//!
//! Three cases, the first that applies: no app is mapped to the interface (or named by
//! `provided_by`); the apps have no instances (or none whose metadata could be had); their
//! instances export other services, or the interface with another group, version or
//! protocol than asked (named, so that `version 1.0` asked of an unversioned export shows).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::subscription::Subscription;
use crate::governance::migration::MigrationStep;
use crate::model::{MetadataInfo, ServiceInfo};

/// What the interface level offers a subscription that reads it (see [`MigrationStep`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InterfaceFindings {
    /// The step the subscription is at.
    pub step: MigrationStep,
    /// Whether the interface level has been read.
    pub read: bool,
    /// The callable endpoints it has.
    pub endpoints: usize,
    /// URLs of the service whose protocol the channel does not speak, and those protocols.
    pub uncallable: usize,
    /// The protocols of those (`dubbo`, …).
    pub uncallable_protocols: Vec<String>,
    /// URLs of the service Dubbo would not call (`disabled=true`).
    pub disabled: usize,
    /// URLs of the interface with another group, version or protocol than asked.
    pub other_services: usize,
    /// URLs that did not read (malformed, over a bound), skipped.
    pub skipped: usize,
    /// Why the interface level cannot be read, when it cannot (a backend without it).
    pub refused: Option<String>,
}

impl fmt::Display for InterfaceFindings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(refused) = &self.refused {
            return write!(f, "the interface level cannot be read: {refused}");
        }
        if !self.read {
            return write!(f, "the interface level has not been read yet");
        }
        write!(
            f,
            "the interface level has {} callable provider URL",
            self.endpoints
        )?;
        if self.endpoints != 1 {
            f.write_str("s")?;
        }
        let mut left_out = Vec::new();
        if self.uncallable > 0 {
            left_out.push(format!(
                "{} of protocol {} (not callable: only tri and grpc are)",
                self.uncallable,
                self.uncallable_protocols.join(", ")
            ));
        }
        if self.disabled > 0 {
            left_out.push(format!("{} disabled", self.disabled));
        }
        if self.other_services > 0 {
            left_out.push(format!(
                "{} of another group, version or protocol",
                self.other_services
            ));
        }
        if self.skipped > 0 {
            left_out.push(format!("{} unreadable, skipped", self.skipped));
        }
        if !left_out.is_empty() {
            write!(f, " ({} left out)", left_out.join("; "))?;
        }
        Ok(())
    }
}

/// What one app of a subscription offers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppFindings {
    /// The app.
    pub app: String,
    /// Its routable instances.
    pub instances: usize,
    /// Instances whose revision's metadata could not be had (yet).
    pub without_metadata: usize,
    /// Of those, the instances whose metadata is on its way: being fetched, or retried
    /// after a failure that may pass (a MetadataService still starting, say). The others
    /// failed in a way no retry mends while the instance stays as it is.
    pub metadata_on_its_way: usize,
    /// What its known revisions export, by match key.
    pub exports: BTreeMap<String, Arc<ServiceInfo>>,
}

impl AppFindings {
    /// What `app` offers: `instances` routable instances, `without_metadata` of them
    /// with no metadata known, exporting what `infos` say.
    pub fn new<'a>(
        app: impl Into<String>,
        instances: usize,
        without_metadata: usize,
        infos: impl IntoIterator<Item = &'a MetadataInfo>,
    ) -> Self {
        AppFindings {
            app: app.into(),
            instances,
            without_metadata,
            metadata_on_its_way: 0,
            exports: infos
                .into_iter()
                .flat_map(|info| info.services.iter())
                .map(|(key, service)| (key.clone(), service.clone()))
                .collect(),
        }
    }

    /// The same findings, `count` of whose instances without metadata have it on its way
    /// (the field `metadata_on_its_way`; at most `without_metadata`).
    pub fn with_metadata_on_its_way(mut self, count: usize) -> Self {
        self.metadata_on_its_way = count.min(self.without_metadata);
        self
    }
}

/// Why a subscription resolves to nothing; see the module docs. Its [`Display`](fmt::Display)
/// is one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explanation {
    /// What was asked for.
    pub subscription: Subscription,
    /// Whether the registry has been read (a subscription that started while it was
    /// unreachable has not).
    pub read: bool,
    /// Whether the apps come from the mapping (else from `provided_by`).
    pub from_mapping: bool,
    /// What each app offers.
    pub apps: Vec<AppFindings>,
    /// What the interface level offers, when the subscription reads it.
    pub interface_level: Option<InterfaceFindings>,
    /// The step the subscription is at, on a backend that has an interface level (`None`
    /// where it has none: one level, nothing to name), so that the explanation says which
    /// level(s) it read.
    pub step: Option<MigrationStep>,
}

impl Explanation {
    /// Whether the subscription is answered: some app offers a matching service (the
    /// explanation then has nothing to explain).
    pub fn has_match(&self) -> bool {
        self.apps
            .iter()
            .any(|a| a.exports.values().any(|service| self.matches(service)))
    }

    /// Whether the metadata of some instance is on its way (see
    /// [`AppFindings::metadata_on_its_way`]): what it exports may answer the subscription
    /// once it arrives, with no change in the registry. A balanced channel's calls wait for
    /// it, within the channel's endpoint wait, rather than fail at once.
    pub fn awaits_metadata(&self) -> bool {
        self.apps.iter().any(|a| a.metadata_on_its_way > 0)
    }

    /// Whether an exported service is one the subscription asks for.
    fn matches(&self, service: &ServiceInfo) -> bool {
        let s = &self.subscription;
        service.name == s.interface
            && s.group.as_deref().is_none_or(|g| g == service.group)
            && s.version.as_deref().is_none_or(|v| v == service.version)
            && s.protocol.as_deref().is_none_or(|p| p == service.protocol)
    }

    /// What the subscription asks for, as a reader would say it.
    fn asked(&self) -> String {
        let s = &self.subscription;
        let mut asked = s.interface.clone();
        for (what, value) in [
            ("group", &s.group),
            ("version", &s.version),
            ("protocol", &s.protocol),
        ] {
            if let Some(value) = value {
                asked.push_str(&format!(" {what} {value:?}"));
            }
        }
        asked
    }
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.interface_level, self.step) {
            (Some(level), Some(MigrationStep::ForceInterface)) => write!(
                f,
                "{} at FORCE_INTERFACE: {level}; the application level is not read at this \
                 step",
                self.subscription.interface
            ),
            (Some(level), _) if level.step == MigrationStep::ForceInterface => {
                write!(
                    f,
                    "{} at {}: {level}",
                    self.subscription.interface, level.step
                )
            }
            (Some(level), step) => {
                f.write_str("the application level: ")?;
                self.application_level(f)?;
                write!(f, "; {level}")?;
                match step {
                    Some(step) => write!(f, " (at {step})"),
                    None => Ok(()),
                }
            }
            (None, Some(MigrationStep::ForceApplication)) => {
                f.write_str("the application level: ")?;
                self.application_level(f)?;
                f.write_str(
                    "; the interface level is not read at FORCE_APPLICATION (APPLICATION_FIRST \
                     reads it too)",
                )
            }
            (None, Some(step)) => {
                f.write_str("the application level: ")?;
                self.application_level(f)?;
                write!(f, "; the interface level has not been read yet (at {step})")
            }
            (None, None) => self.application_level(f),
        }
    }
}

impl Explanation {
    /// The application level's part of the explanation.
    fn application_level(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let interface = &self.subscription.interface;
        if !self.read {
            return write!(
                f,
                "the registry has not answered yet (nothing is known of {interface})"
            );
        }
        if self.apps.is_empty() {
            return if self.from_mapping {
                write!(
                    f,
                    "no app is mapped to {interface} (no provider registered it; is the name \
                     spelled as the provider exports it, package included?)"
                )
            } else {
                write!(f, "no app is named to provide {interface}")
            };
        }
        let names = |apps: &[&AppFindings]| {
            apps.iter()
                .map(|a| a.app.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let all: Vec<&AppFindings> = self.apps.iter().collect();
        if self.apps.iter().all(|a| a.instances == 0) {
            return write!(f, "{} ha{} no instances", names(&all), plural(all.len()));
        }
        let known: Vec<&AppFindings> = self.apps.iter().filter(|a| !a.exports.is_empty()).collect();
        if known.is_empty() && self.apps.iter().all(|a| a.without_metadata == 0) {
            return write!(f, "the instances of {} export nothing", names(&all));
        }
        if known.is_empty() {
            return write!(
                f,
                "the instances of {} have no metadata known yet (their MetadataService did \
                 not answer)",
                names(&all)
            );
        }
        if self.has_match() {
            return write!(f, "{} is provided", self.asked());
        }
        let offered: Vec<String> = known
            .iter()
            .map(|a| {
                let exports: Vec<&str> = a.exports.keys().map(String::as_str).collect();
                format!("{} exports {}", a.app, exports.join(", "))
            })
            .collect();
        write!(f, "none exports {}: {}", self.asked(), offered.join("; "))?;
        let unversioned = known
            .iter()
            .flat_map(|a| a.exports.values())
            .any(|service| service.name == *interface && service.version.is_empty());
        if unversioned && self.subscription.version.is_some() {
            write!(
                f,
                " ({interface} is exported without a version, which only a subscription \
                 without one matches)"
            )?;
        }
        Ok(())
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "s" } else { "ve" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ServiceInfo;

    fn explain(subscription: Subscription, apps: Vec<AppFindings>) -> String {
        Explanation {
            subscription,
            read: true,
            from_mapping: true,
            apps,
            interface_level: None,
            step: None,
        }
        .to_string()
    }

    fn greeter(version: &str) -> MetadataInfo {
        let mut service = ServiceInfo::new("helloworld.Greeter");
        service.version = version.into();
        MetadataInfo::new("greeter", [service]).unwrap()
    }

    #[test]
    fn each_case_says_what_is_missing() {
        let asked = Subscription::new("helloworld.Greeter");
        assert!(
            explain(asked.clone(), vec![]).starts_with("no app is mapped to helloworld.Greeter")
        );
        let idle = AppFindings::new("greeter", 0, 0, []);
        assert_eq!(
            explain(asked.clone(), vec![idle]),
            "greeter has no instances"
        );
        let silent = AppFindings::new("greeter", 3, 3, []);
        assert!(explain(asked.clone(), vec![silent]).contains("no metadata known yet"));
        let info = greeter("");
        let unversioned = AppFindings::new("greeter", 2, 0, [&info]);
        let text = explain(asked.clone().version("1.0"), vec![unversioned.clone()]);
        assert!(
            text.starts_with(
                "none exports helloworld.Greeter version \"1.0\": greeter exports helloworld.Greeter:tri"
            ),
            "{text}"
        );
        assert!(text.contains("exported without a version"), "{text}");
        let other = explain(Subscription::new("helloworld.Farewell"), vec![unversioned]);
        assert!(!other.contains("without a version"), "{other}");
    }

    #[test]
    fn a_matching_export_is_a_match() {
        let info = greeter("1.0");
        let found = Explanation {
            subscription: Subscription::new("helloworld.Greeter")
                .version("1.0")
                .protocol("tri"),
            read: true,
            from_mapping: true,
            apps: vec![AppFindings::new("greeter", 1, 0, [&info])],
            interface_level: None,
            step: None,
        };
        assert!(found.has_match());
        let mut grouped = found.clone();
        grouped.subscription = grouped.subscription.group("g");
        assert!(!grouped.has_match());
    }
}
