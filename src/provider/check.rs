//! The start-up check that the provider's own MetadataService answers for its revision:
//! without it in the router, the instance would register and no consumer could use it.

use std::time::Duration;

use super::Provider;
use crate::error::{Error, Result};
use crate::rpc::{MetadataClient, authority};

/// How long the check waits for the answer.
const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

impl Provider {
    /// Calls MetadataService at the registered host and MetadataService port, as a consumer
    /// would, and asks for the current revision.
    pub(super) async fn check_metadata_service(&self) -> Result<()> {
        let (host, port) = {
            let state = self.shared.state.lock().await;
            (state.instance.host.clone(), state.metadata_port)
        };
        let revision = self.revision();
        let client = MetadataClient::new(CHECK_TIMEOUT, self.shared.limits.clone());
        let Err(e) = client.fetch(&host, port, &revision).await else {
            return Ok(());
        };
        let add = "add `provider.metadata_service()` to the tonic router serving that port \
                   (or run the server with `Provider::serve`, which adds it)";
        let advice = match &e {
            Error::Rpc { status, .. } if status.code() == tonic::Code::Unimplemented => {
                format!("the server there does not serve it: {add}")
            }
            Error::Rpc { status, .. } if status.code() == tonic::Code::NotFound => format!(
                "the MetadataService there does not hold revision {revision}: is it another \
                 provider's? {add}"
            ),
            Error::Connect { .. } | Error::Timeout { .. } => format!(
                "nothing answered ({e}): start your tonic server before `start()` and {add}; \
                 if this process cannot reach the registered address, or the server speaks \
                 TLS, turn the check off with `check_metadata_service(false)`"
            ),
            _ => format!("{e}: {add}"),
        };
        Err(Error::MetadataServiceMissing {
            address: authority(&host, port),
            advice,
            source: Some(e.into()),
        })
    }
}
