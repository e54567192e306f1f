//! Listing an app's instances (and every app) on Nacos: the epoch and the app's naming
//! instances (one `getAllInstances`, asked of the server, not of the SDK's cache), read
//! together. A list has no revision (Nacos has no order of writes a client can see):
//! [`InstanceList::revision`] is `0`.

use std::collections::BTreeMap;

use nacos_sdk::api::naming::NamingService;

use super::client::{Reader, map_error};
use super::{epoch, names, record};
use crate::backend::InstanceList;
use crate::error::Result;
use crate::limits::Limits;
use crate::model::names as model_names;

/// Services asked for per page when listing apps.
const PAGE: i32 = 500;
/// The most services listed (a bound on what a hostile registry costs).
const MAX_SERVICES: usize = 100_000;

/// The naming instances of `app` in `group`, from the server.
pub(super) async fn instances(
    naming: &NamingService,
    group: &str,
    app: &str,
) -> Result<Vec<nacos_sdk::api::naming::ServiceInstance>> {
    let service = names::service_name(app);
    naming
        .get_all_instances(service.clone(), Some(group.to_owned()), Vec::new(), false)
        .await
        .map_err(|e| map_error(e, &format!("list {group}@@{service}")))
}

/// Lists `app`, with the epoch read beside it.
pub(super) async fn list(
    reader: &Reader,
    group: &str,
    app: &str,
    limits: &Limits,
) -> Result<InstanceList> {
    model_names::validate_app(app)?;
    let naming = reader.naming().await?;
    let config = reader.config().await?;
    let (epoch, listed) = tokio::join!(epoch::read(config), instances(naming, group, app));
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
    let naming = reader.naming().await?;
    let mut services = Vec::new();
    for page in 1.. {
        let (names, count) = naming
            .get_service_list(page, PAGE, Some(group.to_owned()))
            .await
            .map_err(|e| map_error(e, &format!("list the services of {group}")))?;
        let got = names.len();
        services.extend(names);
        let total = usize::try_from(count).unwrap_or(0).min(MAX_SERVICES);
        if got == 0 || services.len() >= total {
            break;
        }
    }
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
