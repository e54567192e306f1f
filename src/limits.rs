//! Size limits on everything read from the store or the network.
//!
//! Every value Introspect reads comes from someone else's process. These limits bound what a
//! hostile or broken peer can make a process allocate; a value over a limit is refused with
//! [`Error::TooLarge`] (or skipped with a warning where one bad record must not spoil a
//! whole answer).

use crate::error::{Error, Result};

/// Size limits, with defaults generous for real fleets and small against abuse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest instance record, in bytes.
    pub max_instance_bytes: usize,
    /// Largest metadata info document or gRPC answer, in bytes.
    pub max_metadata_bytes: usize,
    /// Most services in one metadata info.
    pub max_services: usize,
    /// Most parameters of one service or entries of one instance's metadata map.
    pub max_params: usize,
    /// Largest mapping value, in bytes.
    pub max_mapping_bytes: usize,
    /// Most apps one mapping may name. A mapping over it is ignored with one aggregated
    /// warning (the apps already known keep their endpoints); real mappings name a handful.
    pub max_apps_per_mapping: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_instance_bytes: 64 * 1024,
            max_metadata_bytes: 4 * 1024 * 1024,
            max_services: 10_000,
            max_params: 1_000,
            max_mapping_bytes: 256 * 1024,
            max_apps_per_mapping: 1_024,
        }
    }
}

impl Limits {
    /// Fails with [`Error::TooLarge`] when `size` exceeds `limit`.
    pub fn check_size(&self, what: &'static str, size: usize, limit: usize) -> Result<()> {
        if size > limit {
            Err(Error::TooLarge { what, size, limit })
        } else {
            Ok(())
        }
    }
}
