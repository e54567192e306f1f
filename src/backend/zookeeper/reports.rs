//! Metadata reports on ZooKeeper (storage type `remote`): a persistent node
//! `/dubbo/metadata/{app}/{revision}` holding the metadata info JSON, created once and never
//! overwritten (as `ZookeeperMetadataReport.publishAppMetadata`). Reads also look at
//! `/dubbo/{app}/{revision}`, where dubbo-go 3.3 reports.

use zookeeper_client as zk;

use super::paths::Paths;
use super::session::{self, map_error};
use crate::backend::reports::read_report;
use crate::error::Result;
use crate::limits::Limits;
use crate::model::{MetadataInfo, ReportKey, names};

/// The report under `key`: Dubbo Java's node first, then dubbo-go's.
pub(super) async fn get(
    client: &zk::Client,
    paths: &Paths,
    key: &ReportKey,
    limits: &Limits,
) -> Result<Option<MetadataInfo>> {
    let (app, revision) = (key.app(), key.revision());
    let java = client.get_data(&paths.report(app, revision));
    let go = client.get_data(&paths.go_report(app, revision));
    let data = match java.await {
        Ok((data, _)) => data,
        Err(zk::Error::NoNode) => match go.await {
            Ok((data, _)) => data,
            Err(zk::Error::NoNode) => return Ok(None),
            Err(e) => {
                return Err(map_error(
                    e,
                    &format!("read {}", paths.go_report(app, revision)),
                ));
            }
        },
        Err(e) => {
            return Err(map_error(
                e,
                &format!("read {}", paths.report(app, revision)),
            ));
        }
    };
    read_report(key, &data, limits).map(Some)
}

/// Creates the report of `info` unless it exists; returns whether it wrote.
pub(super) async fn put_if_absent(
    client: &zk::Client,
    paths: &Paths,
    acls: zk::Acls<'static>,
    info: &MetadataInfo,
    limits: &Limits,
) -> Result<bool> {
    let json = info.to_report(limits)?;
    let path = paths.report(&info.app, &info.revision);
    match session::create(client, &path, &json, zk::CreateMode::Persistent, acls).await {
        Ok(_) => Ok(true),
        Err(zk::Error::NodeExists) => Ok(false),
        Err(e) => Err(map_error(e, &format!("create {path}"))),
    }
}

/// The revisions reported for `app` under Dubbo Java's node.
pub(super) async fn revisions(
    client: &zk::Client,
    paths: &Paths,
    app: &str,
) -> Result<Vec<String>> {
    names::validate_app(app)?;
    let path = paths.reports(app);
    match client.list_children(&path).await {
        Ok(mut revisions) => {
            revisions.retain(|r| names::validate_revision(r).is_ok());
            revisions.sort_unstable();
            Ok(revisions)
        }
        Err(zk::Error::NoNode) => Ok(Vec::new()),
        Err(e) => Err(map_error(e, &format!("list {path}"))),
    }
}

/// Deletes the report of `app` at `revision`; returns whether it existed.
pub(super) async fn remove(client: &zk::Client, paths: &Paths, key: &ReportKey) -> Result<bool> {
    let path = paths.report(key.app(), key.revision());
    match client.delete(&path, None).await {
        Ok(()) => Ok(true),
        Err(zk::Error::NoNode) => Ok(false),
        Err(e) => Err(map_error(e, &format!("delete {path}"))),
    }
}
