//! Reading interface-level provider URLs on ZooKeeper, as Dubbo's `ZookeeperRegistry`
//! subscribes to them: the children of `{root}/{URL-encoded interface}/providers`, each
//! node's name a URL-encoded URL (the data is not read). Listing reads the children once;
//! following sets a persistent watch on the `providers` node first (its children coming and
//! going fire it; a missing node is fine), then lists, then lists again at each event, so
//! no change falls between the watch and the first list.
//!
//! A name that does not read as a URL ([`ProviderUrl::from_zookeeper_node`]) is skipped
//! with its reason and costs no other URL. When the session disconnects, expires or closes,
//! the follow ends with an `Err`; whoever follows follows again.

use zookeeper_client as zk;

use super::follow::node_changed;
use super::paths::Paths;
use super::session::map_error;
use crate::backend::follow::forward;
use crate::backend::{InterfaceKey, ProviderUrlFollow, ProviderUrls};
use crate::error::Result;
use crate::model::ProviderUrl;
use crate::model::names;
use crate::model::provider_url::{PROVIDERS_CATEGORY, form_encode};

/// `{root}/{URL-encoded interface}/providers`.
pub(super) fn providers_path(paths: &Paths, interface: &str) -> String {
    format!(
        "{}/{}/{PROVIDERS_CATEGORY}",
        paths.interface_root().trim_end_matches('/'),
        form_encode(interface)
    )
}

/// The URLs under `path`; none when the node is absent.
pub(super) async fn list(client: &zk::Client, path: &str) -> Result<ProviderUrls> {
    let children = match client.list_children(path).await {
        Ok(children) => children,
        Err(zk::Error::NoNode) => Vec::new(),
        Err(e) => return Err(map_error(e, &format!("list {path}"))),
    };
    let mut urls = ProviderUrls::default();
    for child in &children {
        urls.push(child, ProviderUrl::from_zookeeper_node(child));
    }
    Ok(urls)
}

/// Follows the URLs of `key`: watch, list, then a list per event.
pub(super) async fn follow(
    client: zk::Client,
    paths: &Paths,
    key: &InterfaceKey,
) -> Result<ProviderUrlFollow> {
    names::validate_interface(&key.interface)?;
    let path = providers_path(paths, &key.interface);
    let mut watcher = client
        .watch(&path, zk::AddWatchMode::Persistent)
        .await
        .map_err(|e| map_error(e, &format!("watch {path}")))?;
    let first = list(&client, &path).await?;
    let (sets, follow) = ProviderUrlFollow::channel();
    let _ = sets.try_send(Ok(first));
    tokio::spawn(async move {
        while let Some(changed) = node_changed(&mut watcher, &sets).await {
            let item = match changed {
                Err(ended) => Err(ended),
                Ok(()) => list(&client, &path)
                    .await
                    .map_err(crate::error::Error::ending_follow),
            };
            if !forward(&sets, item) {
                return;
            }
        }
    });
    Ok(follow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_providers_node_is_under_the_root_with_the_interface_encoded() {
        let paths = Paths::default();
        assert_eq!(
            providers_path(&paths, "shop.Orders$V2"),
            "/dubbo/shop.Orders%24V2/providers"
        );
        let grouped = Paths::with_group("dev").unwrap();
        assert_eq!(
            providers_path(&grouped, "helloworld.Greeter"),
            "/dev/helloworld.Greeter/providers"
        );
    }
}
