//! Following an app or a mapping on a key-value store: a read, then a watch from the read's
//! store revision + 1, so nothing falls between them. The watch's batches become changes;
//! its end becomes the stream's last item, and whoever follows follows again.

use super::KvBackend;
use crate::backend::follow::forward;
use crate::backend::kv::mapping::Mapping;
use crate::backend::{EarlyInstances, InstanceEvent, InstanceFollow, MappingFollow};
use crate::error::Result;
use crate::limits::Limits;

/// Lists `app` (with the epoch), then forwards its watch. The epoch is read, and the watch
/// started, as soon as the list's revision is known, while the rest of the list is read.
pub(super) async fn instances(
    backend: &KvBackend,
    app: &str,
    limits: &Limits,
    early: Option<EarlyInstances<'_>>,
) -> Result<InstanceFollow> {
    let registry = &backend.registry(limits);
    let epoch_and_watch = |revision: i64| async move {
        let epoch = backend.epoch_at(revision);
        let watch = registry.watch(app, revision + 1);
        let (epoch, watch) = tokio::join!(epoch, watch);
        Ok((epoch?, watch?))
    };
    let (mut list, (epoch, mut watch)) = registry.list_beside(app, early, epoch_and_watch).await?;
    list.epoch = epoch;
    let (events, follow) = InstanceFollow::channel();
    // The first event always fits: the channel is empty.
    let _ = events.try_send(Ok(InstanceEvent::Reset(list)));
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                () = events.closed() => return,
                next = watch.next() => next,
            };
            let Some(item) = next.map(InstanceEvent::changes).transpose() else {
                continue;
            };
            if !forward(&events, item) {
                return;
            }
        }
    });
    Ok(follow)
}

/// Reads the mapping of `interface`, then forwards its watch.
pub(super) async fn mapping(mapping: Mapping, interface: String) -> Result<MappingFollow> {
    let value = mapping.get(&interface).await?;
    let mut watch = mapping.watch(&interface, value.revision + 1).await?;
    let (values, follow) = MappingFollow::channel();
    let _ = values.try_send(Ok(value.apps));
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                () = values.closed() => return,
                next = watch.next() => next,
            };
            if !forward(&values, next) {
                return;
            }
        }
    });
    Ok(follow)
}
