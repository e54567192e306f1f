//! ZooKeeper sessions: connecting one, the shared reading session (made again after it
//! expires), node creation with parent containers, and the client's errors sorted into the
//! crate's.
//!
//! The client (`zookeeper-client`) runs its session on a task of its own with its own I/O
//! and timers (not tokio's clock): nothing here sleeps or retries on a timer; retries and
//! backoff stay above the seam.

use std::time::Duration;

use tokio::sync::Mutex;
use zookeeper_client as zk;

use super::options::ZooKeeperOptions;
use super::paths;
use crate::error::{Error, Result};

/// The shortest session timeout a first connection's silence bound is derived from: the
/// server may grant more than was asked (at least two of its ticks), and a bound derived
/// from a tiny ask would drop the connection before its first answer.
const FIRST_BOUND_FLOOR: Duration = Duration::from_secs(2);

/// Connects a new session asking for `session_timeout`, authenticated as the options say,
/// within the options' connect timeout, with a connection timeout of
/// [`connection_timeout`] of the timeout the server grants. The server rounds the ask into
/// its bounds (2 to 20 ticks by default); when it granted another timeout than the one the
/// connection was set up for, the session is made again asking for what was granted, so
/// the connection's bounds fit the session it keeps (a bound from a 10 ms ask would drop a
/// connection after 6 ms of silence; one from a 60 s ask would ping too seldom to keep a
/// 4 s session).
pub(super) async fn connect(
    options: &ZooKeeperOptions,
    session_timeout: Duration,
) -> Result<zk::Client> {
    let bound = connection_timeout(session_timeout.max(FIRST_BOUND_FLOOR));
    let first = connect_asking(options, session_timeout, bound).await?;
    let granted = first.session_timeout();
    if connection_timeout(granted) == bound {
        return Ok(first);
    }
    tracing::debug!(asked = ?session_timeout, ?granted, "session made again for the timeout granted");
    let fitted = connect_asking(options, granted, connection_timeout(granted)).await?;
    // The first session ends with its last client.
    drop(first);
    Ok(fitted)
}

/// One session asking for `session_timeout`, its connection given up after
/// `connection_timeout` of silence. The client gives up a session it could not establish
/// within about the session timeout (a second or two for short sessions, which a busy
/// machine can miss): such an attempt is made again until the connect timeout passes.
async fn connect_asking(
    options: &ZooKeeperOptions,
    session_timeout: Duration,
    connection_timeout: Duration,
) -> Result<zk::Client> {
    let servers = options.connect_string();
    let what = format!("connect to ZooKeeper at {servers}");
    let attempts = async {
        loop {
            let mut connector = zk::Client::connector()
                .with_session_timeout(session_timeout)
                .with_connection_timeout(connection_timeout);
            if let Some((user, password)) = &options.digest {
                connector = connector.with_auth("digest", format!("{user}:{password}").as_bytes());
            }
            match connector.connect(&servers).await {
                Ok(client) => return Ok(client),
                Err(zk::Error::Timeout) => {
                    tracing::debug!(%servers, "no session yet; connecting again")
                }
                Err(e) => return Err(map_error(e, &what)),
            }
        }
    };
    match tokio::time::timeout(options.connect_timeout, attempts).await {
        Ok(connected) => connected,
        Err(_) => Err(Error::store_unavailable(format!(
            "cannot reach ZooKeeper at {servers}: no session within {:?}",
            options.connect_timeout
        ))),
    }
}

/// How long a connection may stay silent before the client gives it up and tries the next
/// server: 3/5 of the session timeout, the most the client accepts. The client pings after
/// 3/8 of it without an answer, so a connection survives answers up to 3/8 of the session
/// timeout late (3.75 s at the default 10 s; Java's client, reading for 2/3 and pinging at
/// 1/3, tolerates 1/3). The client's own default, 2/5, keeps a connection only while
/// answers come less than 1/4 of the session timeout late, and gives up connections of a
/// registry that is slow, not gone, while what a shorter timeout buys (trying the next
/// server sooner) still leaves 2/5 of the session to do it.
fn connection_timeout(session_timeout: Duration) -> Duration {
    session_timeout * 3 / 5
}

/// The error of a record whose session (or node at `path`) is gone: register again.
pub(super) fn lost(client: &zk::Client, path: &str, why: &str) -> Error {
    Error::registration_lost(format!(
        "ZooKeeper session {} of {path}: {why}",
        client.session_id()
    ))
}

/// Checks that the session holding the record at `path` still lives: lost once expired or
/// closed, refused credentials, unavailable while disconnected (the client connects again
/// by itself within the session).
pub(super) fn check_held(client: &zk::Client, path: &str) -> Result<()> {
    match client.state() {
        zk::SessionState::Expired => Err(lost(client, path, "the session expired")),
        zk::SessionState::Closed => Err(lost(client, path, "the session was closed")),
        zk::SessionState::AuthFailed => Err(Error::unauthenticated(format!(
            "ZooKeeper refused the credentials of the session of {path}"
        ))),
        zk::SessionState::Disconnected => Err(Error::store_unavailable(format!(
            "ZooKeeper session {} disconnected",
            client.session_id()
        ))),
        zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => Ok(()),
    }
}

/// Whether a session is over for good (expired, closed, refused).
pub(super) fn is_over(client: &zk::Client) -> bool {
    matches!(
        client.state(),
        zk::SessionState::Expired | zk::SessionState::Closed | zk::SessionState::AuthFailed
    )
}

/// The session readers share (lists, follows, the mapping, reports), connected on first
/// use and made again once it is over.
pub(super) struct Reader {
    options: ZooKeeperOptions,
    client: Mutex<Option<zk::Client>>,
}

impl Reader {
    pub(super) fn new(options: ZooKeeperOptions, client: Option<zk::Client>) -> Self {
        Reader {
            options,
            client: Mutex::new(client),
        }
    }

    /// The reading session: the current one, or a new one when it is over.
    pub(super) async fn client(&self) -> Result<zk::Client> {
        let mut client = self.client.lock().await;
        if let Some(current) = client.as_ref().filter(|c| !is_over(c)) {
            return Ok(current.clone());
        }
        if client.is_some() {
            tracing::info!("ZooKeeper reading session over; connecting a new one");
        }
        let fresh = connect(&self.options, self.options.session_timeout).await?;
        *client = Some(fresh.clone());
        Ok(fresh)
    }
}

/// The sessions registrations live under, one per TTL asked for, each connected on first
/// use and made again once it is over (expired: every registration on it is lost and
/// registers again, under the new one).
pub(super) struct Sessions {
    options: ZooKeeperOptions,
    by_ttl: Mutex<std::collections::HashMap<Duration, zk::Client>>,
}

impl Sessions {
    pub(super) fn new(options: ZooKeeperOptions) -> Self {
        Sessions {
            options,
            by_ttl: Mutex::default(),
        }
    }

    /// The live session asking for `ttl`, connected when there is none.
    pub(super) async fn for_ttl(&self, ttl: Duration) -> Result<zk::Client> {
        let mut sessions = self.by_ttl.lock().await;
        if let Some(live) = sessions.get(&ttl).filter(|c| !is_over(c)) {
            return Ok(live.clone());
        }
        let fresh = connect(&self.options, ttl).await?;
        sessions.insert(ttl, fresh.clone());
        Ok(fresh)
    }
}

/// The ACL of nodes this crate creates: anyone (as Dubbo without credentials), or only the
/// authenticated creator (as Dubbo with credentials: `CREATOR_ALL_ACL`).
pub(super) fn acls(options: &ZooKeeperOptions) -> zk::Acls<'static> {
    if options.digest.is_some() {
        zk::Acls::creator_all()
    } else {
        zk::Acls::anyone_all()
    }
}

/// Creates `path` with `data` as `mode`, creating missing parents as container nodes (as
/// Curator's `creatingParentContainersIfNeeded`; ZooKeeper reaps them once empty). Fails
/// with the client's `NodeExists` when it is there.
pub(super) async fn create(
    client: &zk::Client,
    path: &str,
    data: &[u8],
    mode: zk::CreateMode,
    acls: zk::Acls<'static>,
) -> std::result::Result<zk::Stat, zk::Error> {
    let options = mode.with_acls(acls);
    // A parent reaped between its creation and the child's: a few rounds, then give up.
    for _ in 0..4 {
        match client.create(path, data, &options).await {
            Ok((stat, _)) => return Ok(stat),
            Err(zk::Error::NoNode) => create_parents(client, path, acls).await?,
            Err(e) => return Err(e),
        }
    }
    client
        .create(path, data, &options)
        .await
        .map(|(stat, _)| stat)
}

/// Creates every missing ancestor of `path` as a container node, top down.
async fn create_parents(
    client: &zk::Client,
    path: &str,
    acls: zk::Acls<'static>,
) -> std::result::Result<(), zk::Error> {
    let mut ancestors = Vec::new();
    let mut at = path;
    while let Some(parent) = paths::parent(at) {
        ancestors.push(parent);
        at = parent;
    }
    let options = zk::CreateMode::Container.with_acls(acls);
    for ancestor in ancestors.into_iter().rev() {
        match client.create(ancestor, &[], &options).await {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Sorts a client error into the crate's, naming `what` failed. Credentials and
/// permissions are permanent; connection trouble is transient.
pub(super) fn map_error(error: zk::Error, what: &str) -> Error {
    let sorted = match &error {
        zk::Error::NoAuth => Error::permission_denied(format!(
            "{what}: ZooKeeper refused access (the node's ACL does not let these credentials in)"
        )),
        zk::Error::AuthFailed => {
            Error::unauthenticated(format!("{what}: ZooKeeper refused the credentials"))
        }
        zk::Error::ConnectionLoss
        | zk::Error::Timeout
        | zk::Error::NoHosts
        | zk::Error::SessionMoved
        | zk::Error::Throttled => Error::store_unavailable(format!("{what}: {error}")),
        zk::Error::SessionExpired | zk::Error::ClientClosed => {
            Error::store_unavailable(format!("{what}: the ZooKeeper session is over ({error})"))
        }
        zk::Error::BadArguments(reason) => Error::config(format!("{what}: {reason}")),
        other => Error::store(format!("{what}: ZooKeeper: {other}")),
    };
    sorted.caused_by(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_sort_into_permanent_and_transient() {
        assert!(map_error(zk::Error::NoAuth, "x").is_permanent());
        assert!(map_error(zk::Error::AuthFailed, "x").is_permanent());
        assert!(map_error(zk::Error::ConnectionLoss, "x").is_transient());
        assert!(map_error(zk::Error::SessionExpired, "x").is_transient());
        let other = map_error(zk::Error::NotEmpty, "delete /a");
        assert!(!other.is_permanent() && other.to_string().contains("delete /a"));
        let source = std::error::Error::source(&other).and_then(|s| s.downcast_ref::<zk::Error>());
        assert!(matches!(source, Some(zk::Error::NotEmpty)));
    }
}
