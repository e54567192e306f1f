//! Following an app and a mapping on Nacos.
//!
//! An app: a subscription of the app's naming service (the SDK then receives the server's
//! pushes, each the whole list of instances), then a list from the server as the first
//! reset. The SDK hands pushes to listeners on tasks of their own, so two pushes may reach a
//! listener out of order: a notification only says "the app changed", and the follow then
//! reads the SDK's cache of the service, which holds the newest push. Each list read so is
//! turned into the changes since the last one ([`super::diff::Pushes`]). A list that drops
//! instances is read with the epoch: when the epoch changed or disappeared since the last
//! reset (a server that lost its configs), the list goes out as a reset, so the resolver
//! sees the registry was replaced, instead of as removals.
//!
//! A mapping: a config listener on its `dataId`; each notification reads the value again
//! from the server (through a client that does not listen, see `client::Reader`).
//! The SDK (0.8.3) never tells a listener added while the config was absent that it was
//! created (changes after that arrive), so while the mapping is absent the follow also
//! reads it every [`ABSENT_POLL`].
//!
//! The SDK reconnects and subscribes again by itself, so a follow does not end when the
//! server goes away; it ends (with an `Err`) when reading the SDK's cache fails, and
//! whoever follows follows again.
//!
//! Apps over gRPC's message limit (4 MiB, which the SDK does not let its user raise): the
//! SDK cannot receive a push of such an app (it drops the push together with its
//! connection, and subscribing again fails the same way), so a follow does not rely on
//! pushes once an app is large. A follow whose list is over [`POLL_OVER`] (half the limit)
//! gives its subscription up and reads the list from the server every [`POLL_EVERY`]
//! instead, over HTTP when the gRPC answer would be too large (`reads::instances`); it
//! goes on polling until it ends. So that an app that grows past the limit between two
//! pushes is not followed silently with the last list the SDK received, a follow of an
//! app over [`VERIFY_OVER`] also reads the list from the server every [`VERIFY_EVERY`]
//! while it follows pushes, and polls from then on when that list is over [`POLL_OVER`].
//! An app that grows from under [`VERIFY_OVER`] to over the limit between two pushes (from
//! under about 280 of Introspect's records to over 4,500 within one push of the server) is
//! not caught until it is followed anew.

use std::collections::BTreeSet;
use std::sync::Arc;

use nacos_sdk::api::config::ConfigChangeListener;
use tokio::sync::mpsc;

use super::client::{Reader, is_over_limit, map_error};
use super::diff::Pushes;
use super::subscription::{Changed, Subscription};
use super::{epoch, names, record};
use crate::backend::follow::forward;
use crate::backend::{InstanceChange, InstanceEvent, InstanceFollow, MappingFollow};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::names as model_names;

/// How often a follow reads a mapping that is absent (see the module docs).
pub(super) const ABSENT_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// The size (bytes, estimated) of an app's list over which its follow also reads it from
/// the server every [`VERIFY_EVERY`] while it follows pushes (see the module docs).
pub(super) const VERIFY_OVER: usize = 256 << 10;

/// How often the follow of an app over [`VERIFY_OVER`] reads the list from the server.
pub(super) const VERIFY_EVERY: std::time::Duration = std::time::Duration::from_secs(20);

/// The size (bytes, estimated) of an app's list over which its follow polls the server
/// instead of following pushes: half the SDK's gRPC message limit.
pub(super) const POLL_OVER: usize = super::reads::LARGE;

/// How often the follow of an app over [`POLL_OVER`] reads the list from the server.
pub(super) const POLL_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Bytes a naming instance takes in the server's reply beside its IP and metadata (port,
/// weight, flags, cluster, service name, instance id and the JSON around them), about.
const INSTANCE_OVERHEAD: usize = 250;

/// The estimated size of the server's reply that `list` was read from.
fn list_size(list: &crate::backend::InstanceList) -> usize {
    list.instances
        .values()
        .map(|i| {
            let metadata: usize = i.metadata.iter().map(|(k, v)| k.len() + v.len() + 6).sum();
            i.host.len() + metadata + INSTANCE_OVERHEAD
        })
        .sum()
}

/// Follows `app` in `group`: subscribe, list, then the pushes as changes (or, for a large
/// app, the lists polled; see the module docs).
pub(super) async fn instances(
    reader: Arc<Reader>,
    group: String,
    app: String,
    limits: Limits,
) -> Result<InstanceFollow> {
    model_names::validate_app(&app)?;
    let service = names::service_name(&app);
    let naming = reader.naming().await?.clone();
    let (signal, mut changed) = mpsc::channel(1);
    // An app known to be large is not subscribed to: the server would send its whole list
    // with the subscription's answer (over the limit, or as costly as a read).
    let mut subscription = None;
    if !reader.is_large(&super::reads::key(&group, &app)) {
        match Subscription::start(&naming, &service, &group, signal).await {
            Ok(started) => subscription = Some(started),
            Err(e) if is_over_limit(&e) => {}
            Err(e) => return Err(map_error(e, &format!("subscribe {group}@@{service}"))),
        }
    }
    let first = match super::reads::list(&reader, &group, &app, &limits).await {
        Ok(first) => first,
        Err(e) => {
            if let Some(subscription) = subscription {
                subscription.end().await;
            }
            return Err(e);
        }
    };
    let mut size = list_size(&first);
    if size > POLL_OVER
        && let Some(subscription) = subscription.take()
    {
        subscription.end().await;
    }
    let mut pushes = Pushes::new(&first);
    let mut last_epoch = first.epoch.clone();
    let (events, follow) = InstanceFollow::channel();
    let _ = events.try_send(Ok(InstanceEvent::Reset(first)));
    tokio::spawn(async move {
        let mut verify = tokio::time::interval(VERIFY_EVERY);
        verify.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        verify.reset();
        let mut poll = tokio::time::interval(POLL_EVERY);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        poll.reset();
        loop {
            let listed = tokio::select! {
                () = events.closed() => break,
                Some(()) = changed.recv(), if subscription.is_some() => naming
                    .get_all_instances(service.clone(), Some(group.clone()), Vec::new(), true)
                    .await
                    .map_err(|e| map_error(e, &format!("read {group}@@{service}")).ending_follow()),
                _ = verify.tick(), if subscription.is_some() && size > VERIFY_OVER => {
                    match super::reads::instances(&reader, &group, &app).await {
                        Ok(listed) if super::reads::reply_size(&listed) > POLL_OVER => Ok(listed),
                        Err(e) if !e.is_transient() => Err(e),
                        _ => continue,
                    }
                }
                _ = poll.tick(), if subscription.is_none() => {
                    match super::reads::instances(&reader, &group, &app).await {
                        // The server unreachable: asked again at the next tick, as the SDK
                        // rides out a lost connection.
                        Err(e) if e.is_transient() => continue,
                        other => other.map_err(Error::ending_follow),
                    }
                }
            };
            let item = match listed {
                Ok(listed) => {
                    size = super::reads::reply_size(&listed);
                    if size > POLL_OVER
                        && let Some(subscription) = subscription.take()
                    {
                        tracing::debug!(
                            "the list of {group}@@{service} is large ({size} bytes): polled \
                             every {POLL_EVERY:?} instead of pushed"
                        );
                        subscription.end().await;
                        poll.reset();
                    }
                    let list = record::parse_list(&app, &listed, &limits);
                    let changes = pushes.apply(list.clone());
                    let drops = changes
                        .iter()
                        .any(|c| matches!(c, InstanceChange::Removed(_)));
                    if changes.is_empty() {
                        continue;
                    }
                    match drops {
                        false => Ok(InstanceEvent::Changes(changes)),
                        true => match reader.config().await {
                            Ok(config) => match epoch::read(config).await {
                                Ok(now) if now != last_epoch => {
                                    let mut list = list;
                                    list.epoch = now.clone();
                                    last_epoch = now;
                                    Ok(InstanceEvent::Reset(list))
                                }
                                Ok(_) => Ok(InstanceEvent::Changes(changes)),
                                Err(e) => Err(e.ending_follow()),
                            },
                            Err(e) => Err(e.ending_follow()),
                        },
                    }
                }
                Err(e) => Err(e),
            };
            if !forward(&events, item) {
                break;
            }
        }
        if let Some(subscription) = subscription {
            subscription.end().await;
        }
    });
    Ok(follow)
}

/// Follows the mapping of `interface`: listen, read, then a read per notification.
pub(super) async fn mapping(
    reader: Arc<Reader>,
    interface: String,
    limits: Limits,
) -> Result<MappingFollow> {
    let listening = reader.listening().await?.clone();
    let config = reader.config().await?.clone();
    let data_id = names::config_key(&interface);
    let (signal, mut changed) = mpsc::channel(1);
    let listener: Arc<dyn ConfigChangeListener> = Arc::new(Changed(signal));
    config
        .add_listener(
            data_id.clone(),
            names::MAPPING_GROUP.into(),
            listener.clone(),
        )
        .await
        .map_err(|e| map_error(e, &format!("listen to the mapping of {interface}")))?;
    let first = super::mapping::read(&config, &interface, &limits).await?;
    let (values, follow) = MappingFollow::channel();
    let _ = values.try_send(Ok(first.apps.clone()));
    tokio::spawn(async move {
        let mut last: BTreeSet<String> = first.apps;
        let mut absent = first.cas_md5 == super::mapping::ABSENT_MD5;
        loop {
            tokio::select! {
                () = values.closed() => break,
                Some(()) = changed.recv() => {}
                () = tokio::time::sleep(ABSENT_POLL), if absent => {}
            }
            let item = match super::mapping::read(&config, &interface, &limits).await {
                Ok(value) if value.apps == last => {
                    absent = value.cas_md5 == super::mapping::ABSENT_MD5;
                    continue;
                }
                Ok(value) => {
                    absent = value.cas_md5 == super::mapping::ABSENT_MD5;
                    last = value.apps.clone();
                    Ok(value.apps)
                }
                Err(e) => Err(e.ending_follow()),
            };
            if !forward(&values, item) {
                break;
            }
        }
        let _ = listening
            .remove_listener(data_id, names::MAPPING_GROUP.into(), listener)
            .await;
    });
    Ok(follow)
}
