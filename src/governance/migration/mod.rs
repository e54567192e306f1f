//! Which level of discovery a subscription reads, as Dubbo Java 3.3's migration steps name
//! them (`MigrationStep`): the application level (instances, mapping and metadata: what
//! this crate is built on), the interface level (one URL per provider and service, what
//! Dubbo 2.7 and providers with `register-mode=interface` write), or the application
//! level first.
//!
//! | step | reads | calls go to |
//! |---|---|---|
//! | [`MigrationStep::ForceApplication`] (the default on a backend without an interface level) | the mapping and the apps' instances | the application-level set |
//! | [`MigrationStep::ForceInterface`] | the interface's provider URLs only: no mapping, no app watch | the interface-level set |
//! | [`MigrationStep::ApplicationFirst`] (the default where there is an interface level, as in Java) | both, each followed | the application-level set when it has an endpoint and `application / interface >= threshold` (the migration rule's, else 0.0), checked on every change; else the interface-level one |
//!
//! Only backends with an interface-level layout (ZooKeeper, Nacos, etcd) can read the
//! interface level: elsewhere (the embedded store) a subscription at `ForceInterface` fails to start, saying so, and one
//! at `ApplicationFirst` reads the application level alone (with one warning).
//!
//! An operator steers a consumer app live with its migration rule ([`MigrationRule`],
//! `{app}.migration` in [`MIGRATION_GROUP`]): its step overrides the consumer's own.
//!
//! A consumer that sets no step reads as a Dubbo Java 3.3 one does: `APPLICATION_FIRST`
//! where the backend has an interface level (two more reads and one more watch per
//! subscription: set `FORCE_APPLICATION` to save them), `FORCE_APPLICATION` elsewhere.
//!
//! At `APPLICATION_FIRST`, an application level none of whose endpoints can answer (held
//! instances that left the registry, or endpoints consumer-side health has out) gives way to
//! an interface level that can: Java checks at every call that the application level has a
//! connected invoker. The
//! rule's `proportion` (Java sends `100 - proportion` % of calls to the interface level) is
//! not applied: every call goes to the level chosen, and the level choice says so.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

mod choice;
mod rule;

pub use choice::{Level, LevelChoice, StepSource, application_first_level};
pub use rule::{
    MIGRATION_GROUP, MIGRATION_SUFFIX, MigrationRule, MigrationSettings, SubMigrationRule,
    display_service_key,
};

/// Which level of discovery a subscription reads. See the module docs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MigrationStep {
    /// The application level only (Java's `FORCE_APPLICATION`); the default where the
    /// backend has no interface level (and what [`Default`] gives, for a step not known).
    #[default]
    ForceApplication,
    /// The interface level only (Java's `FORCE_INTERFACE`).
    ForceInterface,
    /// Both; the application-level set when it has any endpoint, else the interface-level
    /// one (Java's `APPLICATION_FIRST` at threshold 0.0).
    ApplicationFirst,
}

impl MigrationStep {
    /// Java's name of the step: `FORCE_APPLICATION`, `FORCE_INTERFACE`, `APPLICATION_FIRST`.
    pub fn as_str(self) -> &'static str {
        match self {
            MigrationStep::ForceApplication => "FORCE_APPLICATION",
            MigrationStep::ForceInterface => "FORCE_INTERFACE",
            MigrationStep::ApplicationFirst => "APPLICATION_FIRST",
        }
    }

    /// The step of a consumer that sets none, as Dubbo Java 3.3's: `APPLICATION_FIRST` on
    /// a backend that has an interface level, else `FORCE_APPLICATION` (there is nothing
    /// else to read).
    pub fn default_for(interface_level: bool) -> MigrationStep {
        if interface_level {
            MigrationStep::ApplicationFirst
        } else {
            MigrationStep::ForceApplication
        }
    }

    /// Whether the step reads the application level.
    pub fn reads_application(self) -> bool {
        self != MigrationStep::ForceInterface
    }

    /// Whether the step reads the interface level.
    pub fn reads_interface(self) -> bool {
        self != MigrationStep::ForceApplication
    }
}

impl fmt::Display for MigrationStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MigrationStep {
    type Err = Error;

    /// Java's names, in any case, `-` or `_` between the words.
    fn from_str(text: &str) -> Result<Self> {
        match text.trim().to_ascii_uppercase().replace('-', "_").as_str() {
            "FORCE_APPLICATION" => Ok(MigrationStep::ForceApplication),
            "FORCE_INTERFACE" => Ok(MigrationStep::ForceInterface),
            "APPLICATION_FIRST" => Ok(MigrationStep::ApplicationFirst),
            _ => Err(Error::config(format!(
                "unknown migration step {:?}: FORCE_APPLICATION, FORCE_INTERFACE or \
                 APPLICATION_FIRST",
                Error::shorten(text)
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_read_as_java_names_them() {
        for step in [
            MigrationStep::ForceApplication,
            MigrationStep::ForceInterface,
            MigrationStep::ApplicationFirst,
        ] {
            assert_eq!(step.as_str().parse::<MigrationStep>().unwrap(), step);
        }
        assert_eq!(
            "force-interface".parse::<MigrationStep>().unwrap(),
            MigrationStep::ForceInterface
        );
        assert!("FORCE".parse::<MigrationStep>().is_err());
        assert_eq!(MigrationStep::default(), MigrationStep::ForceApplication);
    }

    #[test]
    fn a_consumer_without_a_step_reads_as_java_where_there_is_an_interface_level() {
        assert_eq!(
            MigrationStep::default_for(true),
            MigrationStep::ApplicationFirst
        );
        assert_eq!(
            MigrationStep::default_for(false),
            MigrationStep::ForceApplication
        );
        let options = crate::SubscribeOptions::default();
        assert_eq!(options.get_migration_step(), None);
        assert_eq!(options.step_on(true), MigrationStep::ApplicationFirst);
        let forced = options.migration_step(MigrationStep::ForceApplication);
        assert_eq!(forced.step_on(true), MigrationStep::ForceApplication);
    }
}
