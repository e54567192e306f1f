//! One ADS stream: a task reading the client's requests and the catalog's changes, and
//! writing responses.

use std::sync::Arc;

use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::protobuf::Any;
use futures::{Stream, StreamExt};
use tokio::sync::{mpsc, watch};
use tonic::Status;

use crate::catalog::Catalog;
use crate::nacks::NackCounts;
use crate::node::NodeFacts;
use crate::protocol::{StreamProtocol, Verdict, Wanted};
use crate::resources::{Client, names, resource, service_of};

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
    nacks: NackCounts,
    peer: Option<std::net::IpAddr>,
) where
    S: Stream<Item = Result<DiscoveryRequest, Status>> + Unpin,
{
    let mut protocol = StreamProtocol::default();
    let mut changes = catalog.changes();
    // Who the client is: its first request says (later ones may leave the node out).
    let mut node: Option<String> = None;
    let mut client = Client::Grpc;
    let mut facts = NodeFacts::of(None, peer);
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
                if node.is_none() {
                    node = Some(request.node.as_ref().map(|n| n.id.clone()).unwrap_or_default());
                    client = Client::of(request.node.as_ref());
                    facts = NodeFacts::of(request.node.as_ref(), peer);
                }
                match protocol.on_request(&request) {
                    Verdict::Unserved => {
                        tracing::debug!(type_url, "xDS: request for a type not served");
                    }
                    Verdict::Stale => {
                        tracing::debug!(type_url, nonce = short(&request.response_nonce), "xDS: stale request ignored");
                    }
                    Verdict::Nack { respond } => {
                        let node = node.as_deref().unwrap_or_default();
                        log_nack(&request, node);
                        nacks.count(node, &type_url);
                        if respond && !send(&catalog, &mut protocol, &type_url, true, (client, &facts), &out).await {
                            return;
                        }
                    }
                    Verdict::Ack { respond } => {
                        if respond && !send(&catalog, &mut protocol, &type_url, true, (client, &facts), &out).await {
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
                    if !send(&catalog, &mut protocol, &type_url, false, (client, &facts), &out).await {
                        return;
                    }
                }
            }
            () = stopped(&mut stop) => return,
        }
    }
}

/// The client's own words, cut short enough for a log line.
fn short(text: &str) -> String {
    const MAX: usize = 256;
    match text.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// Logs a NACK from `node`, with the client's reason.
fn log_nack(request: &DiscoveryRequest, node: &str) {
    let reason = request
        .error_detail
        .as_ref()
        .map(|s| s.message.as_str())
        .unwrap_or_default();
    tracing::warn!(
        type_url = request.type_url,
        node = short(node),
        version = short(&request.version_info),
        reason = short(reason),
        "xDS: client rejected a response"
    );
}

/// Completes once the server stops (or is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

/// Builds the response of `type_url` for `client`, a client that says `facts` of itself,
/// and sends it when due. False when the client is gone.
async fn send(
    catalog: &Catalog,
    protocol: &mut StreamProtocol,
    type_url: &str,
    force: bool,
    (client, facts): (Client, &NodeFacts),
    out: &Responses,
) -> bool {
    let Some(wanted) = protocol.wanted(type_url) else {
        return true;
    };
    let mut resources: Vec<(String, Any)> = Vec::new();
    match wanted {
        Wanted::Wildcard => {
            for service in catalog.existing() {
                let Some(translation) = catalog.view_for(&service, facts).await else {
                    continue;
                };
                for name in names(type_url, &translation) {
                    if let Some(any) = resource(type_url, &name, &translation, client) {
                        resources.push((name, any));
                    }
                }
            }
        }
        Wanted::Names(wanted) => {
            for name in wanted {
                let service = service_of(&name);
                catalog.follow(service).await;
                let Some(translation) = catalog.view_for(service, facts).await else {
                    continue;
                };
                if let Some(any) = resource(type_url, &name, &translation, client) {
                    resources.push((name, any));
                }
            }
        }
    }
    match protocol.respond(type_url, resources, force) {
        Some(response) => out.send(Ok(response)).await.is_ok(),
        None => true,
    }
}

/// The channel a stream's responses go through.
pub(crate) fn channel() -> (Responses, mpsc::Receiver<Result<DiscoveryResponse, Status>>) {
    mpsc::channel(QUEUED_RESPONSES)
}
