//! Listing an app's instances (and every app) on Nacos: the epoch and the app's naming
//! instances (one `getAllInstances`, asked of the server, not of the SDK's cache), read
//! together. A list has no revision (Nacos has no order of writes a client can see):
//! [`InstanceList::revision`] is `0`.
//!
//! An answer over the SDK's gRPC message limit (4 MiB) is read again over HTTP (see
//! `http`). An app whose list is over [`LARGE`] (half the limit) is remembered as large:
//! its next reads go over HTTP at once, and its follows poll (see `follow`), until a read
//! finds it under [`LARGE`] again.

use std::collections::BTreeMap;

use nacos_sdk::api::naming::{NamingService, ServiceInstance as NacosInstance};

use super::client::{MESSAGE_LIMIT, Reader, is_over_limit, map_error};
use super::{epoch, names, record};
use crate::backend::InstanceList;
use crate::error::Result;
use crate::limits::Limits;
use crate::model::names as model_names;

/// Services asked for per page when listing services.
const PAGE: i32 = 500;
/// The most services listed (a bound on what a hostile registry costs).
const MAX_SERVICES: usize = 100_000;

/// The naming instances of `app` in `group`, from the server: over gRPC, or over HTTP
/// when the gRPC answer is (or was last time) over the SDK's message limit.
pub(super) async fn instances(
    reader: &Reader,
    group: &str,
    app: &str,
) -> Result<Vec<NacosInstance>> {
    let service = names::service_name(app);
    let key = key(group, app);
    if !reader.is_large(&key) {
        let naming = reader.naming().await?;
        match naming
            .get_all_instances(service.clone(), Some(group.to_owned()), Vec::new(), false)
            .await
        {
            Ok(listed) => {
                reader.set_large(&key, reply_size(&listed) > LARGE);
                return Ok(listed);
            }
            Err(e) if is_over_limit(&e) => {
                tracing::debug!(
                    "the list of {key} is over the SDK's gRPC message limit: read over HTTP"
                );
            }
            Err(e) => return Err(map_error(e, &format!("list {key}"))),
        }
    }
    let listed = reader.http().await?.instances(group, &service).await?;
    reader.set_large(&key, reply_size(&listed) > LARGE);
    Ok(listed)
}

/// The estimated size of a list over which an app is large: half the SDK's gRPC limit.
pub(super) const LARGE: usize = MESSAGE_LIMIT / 2;

/// The `group@@service` key of `app` in `group`.
pub(super) fn key(group: &str, app: &str) -> String {
    format!("{group}@@{}", names::service_name(app))
}

/// Bytes a naming instance takes in the server's reply beside its IP and metadata (port,
/// weight, flags, cluster, service name, instance id and the JSON around them), about.
const INSTANCE_OVERHEAD: usize = 250;

/// The estimated size of the server's reply listing `listed`.
pub(super) fn reply_size(listed: &[NacosInstance]) -> usize {
    listed
        .iter()
        .map(|i| record::size_of(&i.ip, &i.metadata) + INSTANCE_OVERHEAD)
        .sum()
}

/// Lists `app`, with the epoch read beside it.
pub(super) async fn list(
    reader: &Reader,
    group: &str,
    app: &str,
    limits: &Limits,
) -> Result<InstanceList> {
    model_names::validate_app(app)?;
    let config = reader.config().await?;
    let (epoch, listed) = tokio::join!(epoch::read(config), instances(reader, group, app));
    let mut list = record::parse_list(app, &listed?, limits);
    list.epoch = epoch?;
    Ok(list)
}

/// Every app of `group` with at least one instance (or skipped record), with its
/// instances.
pub(super) async fn list_apps(
    reader: &Reader,
    group: &str,
    limits: &Limits,
) -> Result<BTreeMap<String, InstanceList>> {
    let mut services = service_names(reader.naming().await?, group, MAX_SERVICES).await?;
    services.truncate(MAX_SERVICES);
    let mut apps: Vec<String> = services
        .iter()
        .map(|service| names::app_of_service(service))
        .filter(|app| model_names::validate_app(app).is_ok())
        .collect();
    apps.sort_unstable();
    apps.dedup();
    let mut all = BTreeMap::new();
    for app in apps {
        let listed = list(reader, group, &app, limits).await?;
        if !listed.instances.is_empty() || !listed.skipped.is_empty() {
            all.insert(app, listed);
        }
    }
    Ok(all)
}

/// The service names of `group`, page by page, until a page is empty or `most` (or the
/// server's count, if lower) are read; the last page may take the list past `most`.
pub(super) async fn service_names(
    naming: &NamingService,
    group: &str,
    most: usize,
) -> Result<Vec<String>> {
    let mut services = Vec::new();
    for page in 1.. {
        let (names, count) = naming
            .get_service_list(page, PAGE, Some(group.to_owned()))
            .await
            .map_err(|e| map_error(e, &format!("list the services of {group}")))?;
        let got = names.len();
        services.extend(names);
        let total = usize::try_from(count).unwrap_or(0).min(most);
        if got == 0 || services.len() >= total {
            break;
        }
    }
    Ok(services)
}
