//! Following one rule key in the config centre: each state parsed as it arrives, the
//! follow started again after a backoff when it fails. Shared by the consumer's rules
//! watcher and the provider's own rules.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

#[cfg(doc)]
use crate::backend::config::DEFAULT_GROUP;
use crate::backend::config::{ConfigCentre, ConfigKey};
use crate::backoff::Backoff;
use crate::error::{Error, Result};

/// What one key's follower reports.
pub(crate) enum KeyState<R> {
    /// The key holds this rule.
    Rule(R),
    /// The key is absent (or was deleted).
    Absent,
    /// The key holds something refused (or cannot be read for good); the previous good
    /// rule is the caller's to keep.
    Refused(String),
}

/// Follows `name` in `group` (rules are in [`DEFAULT_GROUP`], `dubbo`) until `states` closes, reporting each state tagged with
/// `key`, parsed by `parse`; follows again after a backoff when the follow fails. A key
/// that cannot be read for good (no config centre, no right to read) is reported refused
/// once and not followed again.
pub(crate) async fn follow_key<K: Clone, R>(
    config: Arc<dyn ConfigCentre>,
    key: K,
    name: String,
    group: &'static str,
    parse: impl Fn(&str) -> Result<R>,
    states: mpsc::Sender<(K, KeyState<R>)>,
) {
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(10));
    let name = match ConfigKey::new(name, group) {
        Ok(name) => name,
        Err(error) => {
            let _ = states.send((key, refused_for_good(error))).await;
            return;
        }
    };
    loop {
        match config.follow(&name).await {
            Ok(mut follow) => loop {
                let state = match follow.next().await {
                    Ok(Some(item)) => match parse(&item.content) {
                        Ok(rule) => KeyState::Rule(rule),
                        Err(error) => KeyState::Refused(reason_of(error)),
                    },
                    Ok(None) => KeyState::Absent,
                    Err(error @ Error::Rule { .. }) => KeyState::Refused(reason_of(error)),
                    Err(error) => {
                        tracing::debug!(key = %name, %error, "rule key follow ended");
                        break;
                    }
                };
                backoff.reset();
                if states.send((key.clone(), state)).await.is_err() {
                    return;
                }
            },
            Err(error) if error.is_permanent() => {
                // No config centre, or no right to read it: following again cannot help.
                // The key counts as answered, and the reason shows where rules are shown.
                tracing::debug!(key = %name, %error, "rule key cannot be read; not followed");
                let _ = states.send((key, refused_for_good(error))).await;
                return;
            }
            Err(error) => {
                tracing::debug!(key = %name, %error, "cannot follow rule key");
            }
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

/// The state of a key that cannot be read for good.
fn refused_for_good<R>(error: Error) -> KeyState<R> {
    KeyState::Refused(format!("cannot be read: {error}"))
}

/// The reason of a refused rule, without the key (the problem names it).
fn reason_of(error: Error) -> String {
    match error {
        Error::Rule { reason, .. } => reason,
        other => other.to_string(),
    }
}
