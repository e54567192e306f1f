//! Which levels a provider registers at: [`RegisterMode`]. Pure.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// Which levels a provider registers at, as Dubbo's `register-mode`
/// ([`ProviderBuilder::register_mode`](super::ProviderBuilder::register_mode)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RegisterMode {
    /// The application-level instance record only (the default): what Dubbo 3 consumers
    /// read, and every consumer of this crate.
    #[default]
    Instance,
    /// An interface-level URL per exported service only, where Dubbo 2.7 consumers and
    /// Dubbo 3 consumers at `FORCE_INTERFACE` read them; no instance record and no
    /// interface-app mapping (as a Dubbo Java provider with `register-mode=interface`).
    Interface,
    /// Both: the instance record and the interface-level URLs (Dubbo Java 3.3's default for
    /// a plain registry), for a fleet in the middle of its migration.
    All,
}

impl RegisterMode {
    /// Dubbo's name of the mode: `instance`, `interface`, `all`.
    pub fn as_str(self) -> &'static str {
        match self {
            RegisterMode::Instance => "instance",
            RegisterMode::Interface => "interface",
            RegisterMode::All => "all",
        }
    }

    /// Whether the instance record (and the mapping) is written.
    pub fn writes_instance(self) -> bool {
        self != RegisterMode::Interface
    }

    /// Whether interface-level URLs are written.
    pub fn writes_interface(self) -> bool {
        self != RegisterMode::Instance
    }
}

impl fmt::Display for RegisterMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RegisterMode {
    type Err = Error;

    /// Dubbo's names, in any case.
    fn from_str(text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "instance" => Ok(RegisterMode::Instance),
            "interface" => Ok(RegisterMode::Interface),
            "all" => Ok(RegisterMode::All),
            _ => Err(Error::config(format!(
                "unknown register mode {:?}: instance, interface or all",
                Error::shorten(text)
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_and_write_dubbos_names() {
        for mode in [
            RegisterMode::Instance,
            RegisterMode::Interface,
            RegisterMode::All,
        ] {
            assert_eq!(mode.as_str().parse::<RegisterMode>().unwrap(), mode);
        }
        assert_eq!(" ALL ".parse::<RegisterMode>().unwrap(), RegisterMode::All);
        assert!(
            "both"
                .parse::<RegisterMode>()
                .unwrap_err()
                .to_string()
                .contains("instance, interface or all")
        );
        assert_eq!(RegisterMode::default(), RegisterMode::Instance);
        assert!(RegisterMode::All.writes_instance() && RegisterMode::All.writes_interface());
        assert!(!RegisterMode::Interface.writes_instance());
        assert!(!RegisterMode::Instance.writes_interface());
    }
}
