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
//! Replies over gRPC's message limit (4 MiB, which the SDK does not let its user raise):
//! the SDK drops a push it cannot decode together with its connection, and its subscribing
//! again fails the same way, logged only by the SDK. A follow would then keep the last list
//! it read, silently. So a follow of an app whose list is large (over [`LARGE_LIST`]
//! bytes, a quarter of the limit: an app grows past the limit through pushes that still
//! arrive) also asks the server for the list every [`VERIFY_EVERY`]; when that read fails
//! for any reason but the server being unreachable (which the SDK rides out), the follow
//! ends with its error, which says the reply was over the limit, and following again fails
//! with it too ([`super::reads::list`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use nacos_sdk::api::config::{ConfigChangeListener, ConfigResponse};
use nacos_sdk::api::naming::{NamingChangeEvent, NamingEventListener};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use super::client::{Reader, map_error};
use super::diff::Pushes;
use super::{epoch, names, record};
use crate::backend::{InstanceChange, InstanceEvent, InstanceFollow, MappingFollow};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::names as model_names;

/// How often a follow reads a mapping that is absent (see the module docs).
pub(super) const ABSENT_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// The size (bytes, estimated) of an app's list over which its follow also reads it from
/// the server every [`VERIFY_EVERY`] (see the module docs).
pub(super) const LARGE_LIST: usize = 1 << 20;

/// How often the follow of a large app reads the list from the server.
pub(super) const VERIFY_EVERY: std::time::Duration = std::time::Duration::from_secs(20);

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

/// The estimated size of the server's reply listing `listed`.
fn reply_size(listed: &[nacos_sdk::api::naming::ServiceInstance]) -> usize {
    listed
        .iter()
        .map(|i| record::size_of(&i.ip, &i.metadata) + INSTANCE_OVERHEAD)
        .sum()
}

/// Turns the SDK's callbacks into "changed" signals: at most one waits, later ones fold into
/// it (the follow reads the newest state anyway).
struct Changed(mpsc::Sender<()>);

impl NamingEventListener for Changed {
    fn event(&self, _event: Arc<NamingChangeEvent>) {
        let _ = self.0.try_send(());
    }
}

impl ConfigChangeListener for Changed {
    fn notify(&self, _config: ConfigResponse) {
        let _ = self.0.try_send(());
    }
}

/// Follows `app` in `group`: subscribe, list, then the pushes as changes.
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
    let listener: Arc<dyn NamingEventListener> = Arc::new(Changed(signal));
    naming
        .subscribe(
            service.clone(),
            Some(group.clone()),
            Vec::new(),
            listener.clone(),
        )
        .await
        .map_err(|e| map_error(e, &format!("subscribe {group}@@{service}")))?;
    let first = super::reads::list(&reader, &group, &app, &limits).await?;
    let mut pushes = Pushes::new(&first);
    let mut last_epoch = first.epoch.clone();
    let (events, follow) = InstanceFollow::channel();
    let mut large = list_size(&first) > LARGE_LIST;
    let _ = events.try_send(Ok(InstanceEvent::Reset(first)));
    tokio::spawn(async move {
        let mut verify = tokio::time::interval(VERIFY_EVERY);
        verify.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        verify.reset();
        loop {
            tokio::select! {
                () = events.closed() => break,
                Some(()) = changed.recv() => {}
                _ = verify.tick(), if large => {
                    match super::reads::instances(&naming, &group, &app).await {
                        Err(e) if !e.is_transient() => {
                            let _ = forward(&events, Err(e));
                            break;
                        }
                        _ => continue,
                    }
                }
            }
            let cached = naming
                .get_all_instances(service.clone(), Some(group.clone()), Vec::new(), true)
                .await
                .map_err(|e| watch_ended(map_error(e, &format!("read {group}@@{service}"))));
            let item = match cached {
                Ok(listed) => {
                    large = reply_size(&listed) > LARGE_LIST;
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
                                Err(e) => Err(watch_ended(e)),
                            },
                            Err(e) => Err(watch_ended(e)),
                        },
                    }
                }
                Err(e) => Err(e),
            };
            let last = item.is_err();
            if !forward(&events, item) || last {
                break;
            }
        }
        let _ = naming
            .unsubscribe(service, Some(group), Vec::new(), listener)
            .await;
    });
    Ok(follow)
}

/// A read that failed inside a follow ends it as a broken watch (followed again), unless
/// it is permanent.
fn watch_ended(error: Error) -> Error {
    if error.is_permanent() {
        error
    } else {
        Error::WatchEnded(error.to_string())
    }
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
                Err(e) => Err(watch_ended(e)),
            };
            let end = item.is_err();
            if !forward(&values, item) || end {
                break;
            }
        }
        let _ = listening
            .remove_listener(data_id, names::MAPPING_GROUP.into(), listener)
            .await;
    });
    Ok(follow)
}

/// Sends `item` without waiting; returns whether the follower is still there and keeping
/// up (a full buffer ends the stream: the follower reads afresh).
fn forward<T>(sender: &mpsc::Sender<T>, item: T) -> bool {
    match sender.try_send(item) {
        Ok(()) => true,
        Err(TrySendError::Full(_) | TrySendError::Closed(_)) => false,
    }
}
