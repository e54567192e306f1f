//! Which level a subscription's set comes from, and why: what `introspect watch`, the
//! console and the consumer record show, so that an operator mid-migration sees where each
//! consumer's calls go. Pure: the subscription's task fills it in.

use std::fmt;

use super::MigrationStep;

/// A level of discovery.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// Instances, mapping and metadata (Dubbo 3's application-level discovery).
    Application,
    /// One provider URL per service and provider (Dubbo 2.7's interface-level discovery).
    Interface,
}

impl Level {
    /// `application` or `interface`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Application => "application",
            Level::Interface => "interface",
        }
    }

    /// The level `text` names (`application` or `interface`), if any.
    pub fn parse(text: &str) -> Option<Level> {
        match text {
            "application" => Some(Level::Application),
            "interface" => Some(Level::Interface),
            _ => None,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a subscription's step comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepSource {
    /// The consumer's own: the subscription's, else the resolver's default.
    Own,
    /// The consumer app's migration rule, by its key in the config centre
    /// (`{app}.migration`).
    Rule(String),
}

/// Which level a subscription's set comes from now, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct LevelChoice {
    /// The step in force.
    pub step: MigrationStep,
    /// Where it comes from.
    pub source: StepSource,
    /// The level the set comes from.
    pub level: Level,
    /// The endpoints the application level holds for the subscription, when the step
    /// reads it.
    pub application: Option<usize>,
    /// The callable endpoints the interface level holds for the subscription, when the
    /// step reads it and it has been read.
    pub interface: Option<usize>,
    /// A step the migration rule asks for that waits for its `delay` or for its level to
    /// be read (see the migration rule's `force`, `threshold` and `delay`).
    pub pending: Option<MigrationStep>,
    /// A step the migration rule asks for that was not applied, and why.
    pub refused: Option<(MigrationStep, String)>,
    /// Whether no endpoint of the application level can answer while the interface level
    /// can: each comes from an instance that left the registry and is held
    /// (self-preservation, an app that emptied at once), or consumer-side health has it out
    /// (refused, failing every call, hung). At `APPLICATION_FIRST` such a level gives way,
    /// as Java's consumer leaves an application level it has no connected invoker of.
    pub application_set_aside: bool,
    /// The `threshold` compared at `APPLICATION_FIRST` (the migration rule's, else 0.0).
    pub threshold: f32,
    /// The migration rule's `proportion` (below 100), which is not applied: every call
    /// goes to the level chosen.
    pub proportion_not_applied: Option<i32>,
}

/// The level `APPLICATION_FIRST` serves from, decided again on every change as Dubbo Java
/// 3.3's `DefaultMigrationAddressComparator` decides it: the application level when it has
/// an endpoint and the interface level has none, or when `application / interface >=
/// threshold`; else the interface level. `set_aside` says no endpoint of the application
/// level can answer (held instances gone from the registry, or out by health) while the
/// interface level can: they count as none (Java, which holds nothing and checks its
/// connections at every call, calls the interface level).
pub fn application_first_level(
    application: usize,
    set_aside: bool,
    interface: usize,
    threshold: f32,
) -> Level {
    let application = if set_aside && interface > 0 {
        0
    } else {
        application
    };
    if application == 0 && interface > 0 {
        return Level::Interface;
    }
    if application == 0 || interface == 0 {
        return Level::Application;
    }
    #[allow(clippy::cast_precision_loss)] // endpoint counts, far below 2^24
    let share = application as f32 / interface as f32;
    if share >= threshold {
        Level::Application
    } else {
        Level::Interface
    }
}

impl LevelChoice {
    /// The choice of a subscription at `step` before its first set: the level the step
    /// prefers, nothing counted yet.
    pub fn initial(step: MigrationStep) -> Self {
        LevelChoice {
            step,
            source: StepSource::Own,
            level: if step == MigrationStep::ForceInterface {
                Level::Interface
            } else {
                Level::Application
            },
            application: None,
            interface: None,
            pending: None,
            refused: None,
            application_set_aside: false,
            threshold: 0.0,
            proportion_not_applied: None,
        }
    }

    /// Whether the set comes from the interface level only because the application level
    /// has no endpoint (`APPLICATION_FIRST`'s fallback, as Java's).
    pub fn is_fallback(&self) -> bool {
        self.step == MigrationStep::ApplicationFirst && self.level == Level::Interface
    }
}

impl fmt::Display for LevelChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} level, {}", self.level, self.step)?;
        match &self.source {
            StepSource::Own => f.write_str(" (the consumer's own step)")?,
            StepSource::Rule(key) => write!(f, " (from the migration rule {key})")?,
        }
        let count =
            |n: Option<usize>| n.map_or_else(|| "not read yet".to_owned(), |n| n.to_string());
        if self.step == MigrationStep::ApplicationFirst {
            let application = count(self.application);
            let interface = count(self.interface);
            let below = match (self.application, self.interface) {
                (Some(a), Some(i)) if a > 0 && i > 0 => {
                    #[allow(clippy::cast_precision_loss)] // endpoint counts
                    let share = a as f32 / i as f32;
                    (share < self.threshold).then_some(share)
                }
                _ => None,
            };
            match (self.is_fallback(), below) {
                (true, _) if self.application_set_aside => write!(
                    f,
                    ": the application level's {application} endpoint(s) cannot answer (held \
                     after leaving the registry, or out by health), so the interface level's \
                     {interface} serve"
                )?,
                (true, Some(share)) => write!(
                    f,
                    ": the application level has {application} endpoint(s) for {interface} at \
                     the interface level, {share:.2} below the threshold {}, so the interface \
                     level serves",
                    self.threshold
                )?,
                (true, None) => write!(
                    f,
                    ": the application level has no endpoint, so the interface level's \
                     {interface} serve (Java's fallback)"
                )?,
                (false, _) => write!(
                    f,
                    ": the application level has {application} endpoint(s); the interface \
                     level's {interface} stand by"
                )?,
            }
        }
        if let Some(step) = self.pending {
            write!(
                f,
                "; the rule's {step} waits for its delay or for its level to be read"
            )?;
        }
        if let Some((step, why)) = &self.refused {
            write!(f, "; the rule's {step} is not applied: {why}")?;
        }
        if let Some(proportion) = self.proportion_not_applied {
            write!(
                f,
                "; the rule's proportion {proportion} is not applied (every call goes to the \
                 level chosen)"
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fallback_says_the_application_level_is_empty() {
        let choice = LevelChoice {
            level: Level::Interface,
            application: Some(0),
            interface: Some(3),
            ..LevelChoice::initial(MigrationStep::ApplicationFirst)
        };
        assert!(choice.is_fallback());
        assert_eq!(
            choice.to_string(),
            "interface level, APPLICATION_FIRST (the consumer's own step): the application \
             level has no endpoint, so the interface level's 3 serve (Java's fallback)"
        );
    }

    #[test]
    fn a_rule_and_its_refused_move_are_named() {
        let choice = LevelChoice {
            source: StepSource::Rule("shop-web.migration".into()),
            refused: Some((
                MigrationStep::ForceApplication,
                "the application level has no endpoint".into(),
            )),
            ..LevelChoice::initial(MigrationStep::ForceInterface)
        };
        assert!(!choice.is_fallback());
        assert_eq!(
            choice.to_string(),
            "interface level, FORCE_INTERFACE (from the migration rule shop-web.migration); \
             the rule's FORCE_APPLICATION is not applied: the application level has no endpoint"
        );
    }

    #[test]
    fn application_first_compares_the_levels_as_java_does() {
        use Level::{Application, Interface};
        // (application, held only, interface, threshold) → level
        let cases = [
            ((3, false, 0, 0.0), Application),
            ((0, false, 2, 0.0), Interface),
            ((0, false, 0, 0.0), Application),
            ((1, false, 10, 0.0), Application),
            ((1, false, 10, 0.5), Interface),
            ((5, false, 10, 0.5), Application),
            // Held instances give way to an interface level that can answer ...
            ((1, true, 2, 0.0), Interface),
            // ... and serve when nothing else can.
            ((1, true, 0, 0.0), Application),
        ];
        for ((application, held, interface, threshold), level) in cases {
            assert_eq!(
                application_first_level(application, held, interface, threshold),
                level,
                "{application} app, held {held}, {interface} interface, threshold {threshold}"
            );
        }
    }

    #[test]
    fn a_fallback_names_held_instances_the_threshold_and_a_proportion() {
        let fallback = LevelChoice {
            level: Level::Interface,
            application: Some(1),
            interface: Some(2),
            ..LevelChoice::initial(MigrationStep::ApplicationFirst)
        };
        let held = LevelChoice {
            application_set_aside: true,
            ..fallback.clone()
        };
        assert!(held.to_string().contains(
            "the application level's 1 endpoint(s) cannot answer (held after leaving the \
             registry, or out by health), so the interface level's 2 serve"
        ));
        let below = LevelChoice {
            threshold: 0.8,
            proportion_not_applied: Some(60),
            ..fallback
        };
        let text = below.to_string();
        assert!(text.contains("0.50 below the threshold 0.8"), "{text}");
        assert!(text.contains("proportion 60 is not applied"), "{text}");
    }

    #[test]
    fn levels_read_back_from_their_names() {
        for level in [Level::Application, Level::Interface] {
            assert_eq!(Level::parse(level.as_str()), Some(level));
        }
        assert_eq!(Level::parse("Interface"), None);
    }
}
