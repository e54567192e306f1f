//! A config-centre item and its version: plain values, shared by the backends that keep
//! them, the error that reports a conflicting write, and the rules read from them.

/// The largest config item (a governance rule) read or written, in bytes (the Go admin's
/// bound on scripts). A larger one is refused with its key and size; a rule watcher keeps
/// the previous one.
pub const MAX_RULE_BYTES: usize = 64 * 1024;

/// A config item: its text and the version to compare-and-set against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigItem {
    /// The text, UTF-8, at most [`MAX_RULE_BYTES`] bytes.
    pub content: String,
    /// The version it was read at.
    pub version: ConfigVersion,
}

/// An opaque version of a config item, only compared and handed back: the ZooKeeper node's
/// creation and data versions, the MD5 of a Nacos config's content, the etcd key's
/// modification revision.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConfigVersion(String);

impl ConfigVersion {
    /// A version as a backend (or an earlier read, kept as text) gives it.
    pub fn new(version: impl Into<String>) -> Self {
        ConfigVersion(version.into())
    }

    /// The version as text, to keep and give back later.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ConfigVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
