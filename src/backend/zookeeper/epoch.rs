//! The registry's epoch on ZooKeeper: a persistent node (`/introspect/epoch`, under the
//! group root with a group) holding a random id, created by providers when it is absent and
//! read with every list. A server replaced or wiped forgets it: its change or disappearance
//! is what consumers see. No Dubbo reader looks there: Java and Go read `/services/{app}`
//! (or `/{group}/{app}`) and `/dubbo/…`.

use zookeeper_client as zk;

use super::paths::Paths;
use super::session::{self, map_error};
use crate::error::Result;

/// Creates the epoch with a fresh random id unless it exists. It is looked for first: a
/// create that finds the node is still a transaction the server logs (an error one), and
/// it would go through the server's write pipeline ahead of the record created beside it.
pub(super) async fn ensure(
    client: &zk::Client,
    paths: &Paths,
    acls: zk::Acls<'static>,
) -> Result<()> {
    match client.check_stat(paths.epoch()).await {
        Ok(Some(_)) => return Ok(()),
        Ok(None) => {}
        Err(e) => return Err(map_error(e, &format!("check {}", paths.epoch()))),
    }
    let id = hex::encode(rand::random::<[u8; 16]>());
    match session::create(
        client,
        paths.epoch(),
        id.as_bytes(),
        zk::CreateMode::Persistent,
        acls,
    )
    .await
    {
        Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
        Err(e) => Err(map_error(e, &format!("create {}", paths.epoch()))),
    }
}

/// Reads the epoch, if any: the future is made (and its request sent) at once, so that a
/// list can send its own requests right behind it.
pub(super) fn read(
    client: &zk::Client,
    paths: &Paths,
) -> impl std::future::Future<Output = Result<Option<String>>> + Send + 'static {
    let reading = client.get_data(paths.epoch());
    let path = paths.epoch().to_owned();
    async move {
        match reading.await {
            Ok((data, _)) if data.len() <= 256 => {
                Ok(Some(String::from_utf8_lossy(&data).into_owned()))
            }
            // An epoch nobody of ours wrote: still an identity, shortened.
            Ok((data, _)) => Ok(Some(hex::encode(&data[..32]))),
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(map_error(e, &format!("read {path}"))),
        }
    }
}
