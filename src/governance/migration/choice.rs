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
#[derive(Clone, Debug, PartialEq, Eq)]
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
            if self.is_fallback() {
                write!(
                    f,
                    ": the application level has no endpoint, so the interface level's {} \
                     serve (Java's fallback)",
                    count(self.interface)
                )?;
            } else {
                write!(
                    f,
                    ": the application level has {} endpoint(s); the interface level's {} \
                     stand by",
                    count(self.application),
                    count(self.interface)
                )?;
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
    fn levels_read_back_from_their_names() {
        for level in [Level::Application, Level::Interface] {
            assert_eq!(Level::parse(level.as_str()), Some(level));
        }
        assert_eq!(Level::parse("Interface"), None);
    }
}
