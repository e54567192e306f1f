//! A config item's address and what a write puts, both checked once, where they are made:
//! [`ConfigKey`] (key and group, names that cannot reach outside their group on any
//! backend) and [`ConfigWrite`] (content Dubbo can read back, and the version it replaces),
//! with the checks of content as read.

use crate::config_item::{ConfigVersion, MAX_RULE_BYTES};
use crate::error::{Error, Result};

/// The longest key or group accepted (Nacos's limit on a `dataId`).
const MAX_NAME_LEN: usize = 256;

/// Where a config item lives: its key in its group, both checked once, when made, as Dubbo's
/// rule keys look (`shop.tag-router`, `com.foo.Svc:1.0:grp.configurators`) so that no name
/// can reach outside its group on any backend. Shown as `{group}/{key}`.
///
/// ```
/// use introspect::backend::config::ConfigKey;
///
/// let key = ConfigKey::new("shop.tag-router", "dubbo")?;
/// assert_eq!(key.to_string(), "dubbo/shop.tag-router");
/// assert!(ConfigKey::new("../etc", "dubbo").is_err());
/// # Ok::<(), introspect::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConfigKey {
    group: String,
    key: String,
}

impl ConfigKey {
    /// The item `key` in `group`; fails with [`Error::InvalidName`] for a name that is empty,
    /// longer than 256 bytes, `.` or `..`, or holds anything but letters, digits and
    /// `. _ - : $`.
    pub fn new(key: impl Into<String>, group: impl Into<String>) -> Result<Self> {
        let (key, group) = (key.into(), group.into());
        validate_key(&key)?;
        validate_group(&group)?;
        Ok(ConfigKey { group, key })
    }

    /// The key within the group.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The group.
    pub fn group(&self) -> &str {
        &self.group
    }
}

impl std::fmt::Display for ConfigKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.group, self.key)
    }
}

/// What a compare-and-set write puts: the content, and the version the item must still have
/// (`None`: it must be absent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigWrite<'a> {
    content: &'a str,
    expected: Option<&'a ConfigVersion>,
}

impl<'a> ConfigWrite<'a> {
    /// Writes `content` if the item's version is still `expected`; `None`: only if absent.
    pub fn new(content: &'a str, expected: Option<&'a ConfigVersion>) -> Self {
        ConfigWrite { content, expected }
    }

    /// Creates the item with `content`; fails if it exists.
    pub fn create(content: &'a str) -> Self {
        ConfigWrite::new(content, None)
    }

    /// Replaces the item read at `expected` with `content`; fails if it changed since.
    pub fn replace(content: &'a str, expected: &'a ConfigVersion) -> Self {
        ConfigWrite::new(content, Some(expected))
    }

    /// The content to write.
    pub fn content(&self) -> &'a str {
        self.content
    }

    /// The version the item must still have; `None`: it must be absent.
    pub fn expected(&self) -> Option<&'a ConfigVersion> {
        self.expected
    }

    /// Refuses content Dubbo could not read back: empty (Dubbo reads an empty item as
    /// absent, and Nacos refuses one) or over [`MAX_RULE_BYTES`].
    pub(crate) fn check(&self, key: &ConfigKey) -> Result<()> {
        if self.content.is_empty() {
            return Err(Error::Rule {
                key: key.to_string(),
                reason: "empty content: delete the item instead".into(),
                source: None,
            });
        }
        if self.content.len() > MAX_RULE_BYTES {
            return Err(too_large(key, self.content.len()));
        }
        Ok(())
    }
}

/// The refusal of content over the bound, of `size` bytes, for the item `key` names.
pub(crate) fn too_large(key: &dyn std::fmt::Display, size: usize) -> Error {
    Error::Rule {
        key: key.to_string(),
        reason: format!("{size} bytes, over the limit of {MAX_RULE_BYTES}"),
        source: None,
    }
}

/// Content as read for the item `key` names: refused when over the bound or not UTF-8.
pub(crate) fn decode(key: &dyn std::fmt::Display, bytes: Vec<u8>) -> Result<String> {
    if bytes.len() > MAX_RULE_BYTES {
        return Err(too_large(key, bytes.len()));
    }
    String::from_utf8(bytes).map_err(|e| {
        Error::Rule {
            key: key.to_string(),
            reason: format!("not UTF-8 text ({})", e.utf8_error()),
            source: None,
        }
        .caused_by(e)
    })
}

/// Checks a config key as Dubbo's rule keys look: `shop.tag-router`,
/// `com.foo.Svc:1.0:grp.configurators`, `com.foo.Svc::.condition-router`.
pub fn validate_key(key: &str) -> Result<()> {
    validate("config key", key)
}

/// Checks a config group (`dubbo`): one segment, no `/`.
pub fn validate_group(group: &str) -> Result<()> {
    validate("config group", group)
}

fn validate(kind: &'static str, value: &str) -> Result<()> {
    let reason = if value.is_empty() {
        Some("must not be empty")
    } else if value.len() > MAX_NAME_LEN {
        Some("is longer than 256 bytes")
    } else if value == "." || value == ".." {
        Some("must not be . or ..")
    } else if !value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '$'))
    {
        Some("may hold only letters, digits and . _ - : $ (no / or whitespace)")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidName {
            kind,
            value: Error::shorten(value),
            reason,
        }),
        None => Ok(()),
    }
}
