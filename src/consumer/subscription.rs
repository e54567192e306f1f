//! What a consumer asks for: an interface with optional qualifiers.

use crate::error::Result;
use crate::governance::migration::MigrationStep;
use crate::model::names;

/// An interface to resolve, with optional group, version and protocol filters and an
/// optional list of apps that skips the mapping lookup.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Subscription {
    /// The interface name, e.g. `shop.OrderService`.
    pub interface: String,
    /// Only services of this group (`None`: any).
    pub group: Option<String>,
    /// Only services of this version (`None`: any).
    pub version: Option<String>,
    /// Only services of this protocol (`None`: any).
    pub protocol: Option<String>,
    /// Apps known to provide the interface; when non-empty the mapping is not read.
    pub provided_by: Vec<String>,
    /// Which level of discovery to read (`None`: the resolver's
    /// [`SubscribeOptions::migration_step`](crate::SubscribeOptions::migration_step)).
    pub migration: Option<MigrationStep>,
}

impl Subscription {
    /// A subscription to every provider of `interface`.
    pub fn new(interface: impl Into<String>) -> Self {
        Subscription {
            interface: interface.into(),
            ..Default::default()
        }
    }

    /// Only services of `group`.
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Only services of `version`.
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    /// Only services of `protocol`.
    pub fn protocol(mut self, protocol: impl Into<String>) -> Self {
        self.protocol = Some(protocol.into());
        self
    }

    /// Skips the mapping: these apps provide the interface.
    pub fn provided_by<I, S>(mut self, apps: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.provided_by = apps.into_iter().map(Into::into).collect();
        self
    }

    /// Reads the level(s) of discovery `step` says (see [`MigrationStep`]), whatever the
    /// resolver's default.
    pub fn migration(mut self, step: MigrationStep) -> Self {
        self.migration = Some(step);
        self
    }

    /// Checks every name in the subscription.
    pub fn validate(&self) -> Result<()> {
        names::validate_interface(&self.interface)?;
        for (kind, value) in [
            ("group", &self.group),
            ("version", &self.version),
            ("protocol", &self.protocol),
        ] {
            if let Some(value) = value {
                names::validate_qualifier(kind, value)?;
            }
        }
        self.provided_by
            .iter()
            .try_for_each(|app| names::validate_app(app))
    }
}
