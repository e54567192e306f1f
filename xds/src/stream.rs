//! One ADS stream: a task reading the client's requests and the catalog's changes, and
//! writing responses.

use std::sync::Arc;

use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::protobuf::Any;
use futures::{Stream, StreamExt};
use tokio::sync::{mpsc, watch};
use tonic::Status;

use crate::catalog::Catalog;
use crate::protocol::{StreamProtocol, Verdict, Wanted};
use crate::resources::resource;

/// Responses a stream may have queued before it waits for the client to read them.
const QUEUED_RESPONSES: usize = 16;

/// Where a stream's responses go.
pub(crate) type Responses = mpsc::Sender<Result<DiscoveryResponse, Status>>;

/// Runs one stream until the client closes it, the transport fails or the server stops.
/// Responses go out through `out`.
pub(crate) async fn run<S>(
    catalog: Arc<Catalog>,
    mut requests: S,
    out: Responses,
    mut stop: watch::Receiver<bool>,
) where
    S: Stream<Item = Result<DiscoveryRequest, Status>> + Unpin,
{
    let mut protocol = StreamProtocol::default();
    let mut changes = catalog.changes();
    loop {
        tokio::select! {
            request = requests.next() => {
                let request = match request {
                    Some(Ok(request)) => request,
                    Some(Err(status)) => {
                        tracing::debug!(%status, "xDS: stream ended by the transport");
                        return;
                    }
                    None => return,
                };
                let type_url = request.type_url.clone();
                match protocol.on_request(&request) {
                    Verdict::Unserved => {
                        tracing::debug!(type_url, "xDS: request for a type not served");
                    }
                    Verdict::Stale => {
                        tracing::debug!(type_url, nonce = request.response_nonce, "xDS: stale request ignored");
                    }
                    Verdict::Nack { respond } => {
                        let reason = request.error_detail.as_ref().map(|s| s.message.clone()).unwrap_or_default();
                        tracing::warn!(type_url, version = request.version_info, reason, "xDS: client rejected a response");
                        if respond && !send(&catalog, &mut protocol, &type_url, true, &out).await {
                            return;
                        }
                    }
                    Verdict::Ack { respond } => {
                        if respond && !send(&catalog, &mut protocol, &type_url, true, &out).await {
                            return;
                        }
                    }
                }
            }
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
                for type_url in protocol.requested() {
                    if !send(&catalog, &mut protocol, &type_url, false, &out).await {
                        return;
                    }
                }
            }
            () = stopped(&mut stop) => return,
        }
    }
}

/// Completes once the server stops (or is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

/// Builds the response of `type_url` and sends it when due. False when the client is gone.
async fn send(
    catalog: &Catalog,
    protocol: &mut StreamProtocol,
    type_url: &str,
    force: bool,
    out: &Responses,
) -> bool {
    let Some(wanted) = protocol.wanted(type_url) else {
        return true;
    };
    let names = match wanted {
        Wanted::Wildcard => catalog.existing(),
        Wanted::Names(names) => {
            for name in &names {
                catalog.follow(name).await;
            }
            names
        }
    };
    let resources: Vec<Any> = names
        .iter()
        .filter_map(|name| {
            let endpoints = catalog.view(name)?;
            resource(type_url, name, &endpoints)
        })
        .collect();
    match protocol.respond(type_url, resources, force) {
        Some(response) => out.send(Ok(response)).await.is_ok(),
        None => true,
    }
}

/// The channel a stream's responses go through.
pub(crate) fn channel() -> (Responses, mpsc::Receiver<Result<DiscoveryResponse, Status>>) {
    mpsc::channel(QUEUED_RESPONSES)
}
