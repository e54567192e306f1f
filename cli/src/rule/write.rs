//! Reading, writing and deleting one rule by compare-and-set: every write names the
//! version it replaces, so a change made by someone else since is a conflict
//! ([`Error::Conflict`], carrying the current rule), never a silent overwrite.

use introspect::Error;
use introspect::backend::ConfigCentre;
use introspect::backend::config::{ConfigItem, ConfigKey, ConfigVersion, ConfigWrite};

/// Which version a write replaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Exactly this one (`--expect VERSION`), as an earlier `get` gave it.
    Version(ConfigVersion),
    /// None: the rule must be absent (`--create`).
    Absent,
    /// The one read just before the write (neither flag): whatever changes between that
    /// read and the write is a conflict.
    Current,
}

/// The rule under `key` in `group`; absent is [`Error::NotFound`].
pub async fn get(config: &dyn ConfigCentre, key: &str, group: &str) -> Result<ConfigItem, Error> {
    config
        .get(&ConfigKey::new(key, group)?)
        .await?
        .ok_or_else(|| absent(key, group))
}

/// Writes `content` under `key` in `group` against the version `expect` names; returns
/// the new version.
pub async fn put(
    config: &dyn ConfigCentre,
    key: &str,
    group: &str,
    content: &str,
    expect: Expect,
) -> Result<ConfigVersion, Error> {
    let at = ConfigKey::new(key, group)?;
    let expected = match expect {
        Expect::Version(version) => Some(version),
        Expect::Absent => None,
        Expect::Current => config.get(&at).await?.map(|item| item.version),
    };
    config
        .put(&at, ConfigWrite::new(content, expected.as_ref()))
        .await
}

/// Deletes the rule under `key` in `group` if its version is still `expected` (`None`:
/// the one read just before); returns the version deleted.
pub async fn delete(
    config: &dyn ConfigCentre,
    key: &str,
    group: &str,
    expected: Option<ConfigVersion>,
) -> Result<ConfigVersion, Error> {
    let (expected, given) = match expected {
        Some(version) => (version, true),
        None => (get(config, key, group).await?.version, false),
    };
    match config.delete(&ConfigKey::new(key, group)?, &expected).await {
        Ok(()) => Ok(expected),
        // A version the operator gave was never read here: say what is, not "changed".
        Err(Error::Conflict { current, .. }) if given => Err(match current {
            None => absent(key, group),
            Some(item) => Error::Rule {
                key: format!("{group}/{key}"),
                reason: format!(
                    "its version is {}, not the expected {expected}: nothing was deleted \
                     (`introspect rule get {key} --group {group}` shows it)",
                    item.version
                ),
                source: None,
            },
        }),
        Err(e) => Err(e),
    }
}

/// The error for a rule that is not there.
fn absent(key: &str, group: &str) -> Error {
    Error::NotFound(format!(
        "no rule {key} in group {group} (`introspect rule list --group {group}` lists them)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use introspect::backend::Backend;
    use std::sync::Arc;

    #[tokio::test]
    async fn writes_compare_and_set_and_a_stale_one_conflicts() {
        let backend = Backend::from(Arc::new(introspect::MemoryStore::new()));
        let config = &**backend.config();
        let (key, group) = ("shop.tag-router", "dubbo");
        assert!(matches!(
            get(config, key, group).await,
            Err(Error::NotFound(_))
        ));
        let v1 = put(config, key, group, "tags: []", Expect::Current)
            .await
            .unwrap();
        assert!(matches!(
            put(config, key, group, "force: true", Expect::Absent).await,
            Err(Error::Conflict { .. })
        ));
        let v2 = put(
            config,
            key,
            group,
            "force: true",
            Expect::Version(v1.clone()),
        )
        .await
        .unwrap();
        match put(
            config,
            key,
            group,
            "lost: true",
            Expect::Version(v1.clone()),
        )
        .await
        {
            Err(Error::Conflict {
                current: Some(now), ..
            }) => {
                assert_eq!(now.content, "force: true");
                assert_eq!(now.version, v2);
            }
            other => panic!("expected a conflict, got {other:?}"),
        }
        let v3 = put(config, key, group, "tags: [a]", Expect::Current)
            .await
            .unwrap();
        let stale = delete(config, key, group, Some(v2.clone())).await;
        let said = stale
            .expect_err("a stale version deletes nothing")
            .to_string();
        assert!(
            said.contains(&format!("its version is {v3}, not the expected {v2}")),
            "{said}"
        );
        let none = delete(config, "shop.none", group, Some(v2)).await;
        assert!(matches!(none, Err(Error::NotFound(_))), "{none:?}");
        assert_eq!(delete(config, key, group, None).await.unwrap(), v3);
        assert!(matches!(
            delete(config, key, group, None).await,
            Err(Error::NotFound(_))
        ));
    }
}
