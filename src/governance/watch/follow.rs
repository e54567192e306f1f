//! Following one rule key in the config centre: each state parsed as it arrives, the
//! follow started again after a backoff when it fails. Under the shared rule follows (the
//! consumer's channels and the provider's own rules) and the consumer's migration rule.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

#[cfg(doc)]
use crate::backend::config::DEFAULT_GROUP;
use crate::backend::config::{ConfigCentre, ConfigKey};
use crate::backoff::{Attempt, Backoff, retry_with_backoff};
use crate::error::{Error, Result};

/// First delay before a failed rule follow is tried again.
const RETRY_BASE: Duration = Duration::from_millis(200);
/// Longest delay between tries of a failed rule follow.
const RETRY_MAX: Duration = Duration::from_secs(10);

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

/// One key's follow: what each attempt needs.
struct KeyFollow<K, P> {
    config: Arc<dyn ConfigCentre>,
    key: K,
    name: ConfigKey,
    parse: P,
}

/// Follows `name` in `group` (rules are in [`DEFAULT_GROUP`], `dubbo`) until `states`
/// closes, reporting each state tagged with `key`, parsed by `parse`; follows again after a
/// backoff when the follow fails. A key that cannot be read for good (no config centre, no
/// right to read) is reported refused once and not followed again.
pub(crate) async fn follow_key<K: Clone, R>(
    config: Arc<dyn ConfigCentre>,
    key: K,
    name: String,
    group: &'static str,
    parse: impl Fn(&str) -> Result<R>,
    states: mpsc::Sender<(K, KeyState<R>)>,
) {
    let name = match ConfigKey::new(name, group) {
        Ok(name) => name,
        Err(error) => {
            let _ = states.send((key, refused_for_good(error))).await;
            return;
        }
    };
    let follow = Arc::new(KeyFollow {
        config,
        key,
        name,
        parse,
    });
    let backoff = Backoff::new(RETRY_BASE, RETRY_MAX);
    retry_with_backoff(backoff, || follow_once(follow.clone(), states.clone())).await;
}

/// One attempt of [`follow_key`]: the key followed until the follow fails.
async fn follow_once<K: Clone, R, P: Fn(&str) -> Result<R>>(
    follow: Arc<KeyFollow<K, P>>,
    states: mpsc::Sender<(K, KeyState<R>)>,
) -> Attempt {
    let KeyFollow {
        config,
        key,
        name,
        parse,
    } = &*follow;
    let mut follow = match config.follow(name).await {
        Ok(follow) => follow,
        Err(error) if error.is_permanent() => {
            // No config centre, or no right to read it: following again cannot help. The
            // key counts as answered, and the reason shows where rules are shown.
            tracing::debug!(key = %name, %error, "rule key cannot be read; not followed");
            let _ = states.send((key.clone(), refused_for_good(error))).await;
            return Attempt::Stop;
        }
        Err(error) => {
            tracing::debug!(key = %name, %error, "cannot follow rule key");
            return Attempt::Failed;
        }
    };
    let mut delivered = Attempt::Failed;
    loop {
        let state = match follow.next().await {
            Ok(Some(item)) => match parse(&item.content) {
                Ok(rule) => KeyState::Rule(rule),
                Err(error) => KeyState::Refused(reason_of(error)),
            },
            Ok(None) => KeyState::Absent,
            Err(error @ Error::Rule { .. }) => KeyState::Refused(reason_of(error)),
            Err(error) => {
                tracing::debug!(key = %name, %error, "rule key follow ended");
                return delivered;
            }
        };
        delivered = Attempt::Delivered;
        if states.send((key.clone(), state)).await.is_err() {
            return Attempt::Stop;
        }
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
