//! A scripted ADS client: sends exactly the requests a test names and reads the answers
//! one by one, so ACKs, NACKs, stale nonces and unsubscribes are the test's own choices.

use std::time::Duration;

use introspect_xds::envoy_types::pb::envoy::config::core::v3::Node;
use introspect_xds::envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use introspect_xds::envoy_types::pb::envoy::service::discovery::v3::{
    DiscoveryRequest, DiscoveryResponse,
};
use introspect_xds::envoy_types::pb::google::rpc::Status;
use introspect_xds::envoy_types::pb::envoy::config::core::v3::address::Address;
use introspect_xds::envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier;
use introspect_xds::envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use introspect_xds::envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint::HostIdentifier;
use introspect_xds::types::CLUSTER_LOAD_ASSIGNMENT;
use prost::Message;
use tokio::sync::mpsc;
use tonic::Streaming;

/// How long a test waits for an answer that must come.
pub const ANSWER: Duration = Duration::from_secs(10);

/// One open ADS stream.
pub struct AdsClient {
    requests: mpsc::Sender<DiscoveryRequest>,
    responses: Streaming<DiscoveryResponse>,
    /// The node its requests carry.
    node: Node,
}

impl AdsClient {
    /// Opens a stream to the server at `address` (`http://127.0.0.1:PORT`).
    pub async fn connect(address: String) -> AdsClient {
        let channel = tonic::transport::Endpoint::new(address)
            .expect("a valid address")
            .connect()
            .await
            .expect("the xDS server accepts connections");
        AdsClient::open(channel).await.expect("the stream opens")
    }

    /// Opens a stream over `channel`, or the status the server refused it with.
    pub async fn open(channel: tonic::transport::Channel) -> Result<AdsClient, tonic::Status> {
        let mut client = AggregatedDiscoveryServiceClient::new(channel);
        let (requests, outgoing) = mpsc::channel(16);
        let responses = client
            .stream_aggregated_resources(tokio_stream::wrappers::ReceiverStream::new(outgoing))
            .await?
            .into_inner();
        Ok(AdsClient {
            requests,
            responses,
            node: Node {
                id: "test-client".into(),
                ..Default::default()
            },
        })
    }

    /// This client, saying `node` of itself in its requests.
    pub fn saying(mut self, node: Node) -> AdsClient {
        self.node = node;
        self
    }

    /// Sends a request of `type_url` for `names`, answering `nonce` with `version`.
    pub async fn send(&self, type_url: &str, names: &[&str], version: &str, nonce: &str) {
        let mut request = request(type_url, names, version, nonce);
        request.node = Some(self.node.clone());
        self.send_request(request).await;
    }

    /// Sends a NACK of the response with `nonce` (still subscribed to `names`).
    pub async fn nack(&self, type_url: &str, names: &[&str], version: &str, nonce: &str) {
        let mut nack = request(type_url, names, version, nonce);
        nack.node = Some(self.node.clone());
        nack.error_detail = Some(Status {
            code: 3,
            message: "rejected by the test".into(),
            details: vec![],
        });
        self.send_request(nack).await;
    }

    /// ACKs `response` for `names`.
    pub async fn ack(&self, response: &DiscoveryResponse, names: &[&str]) {
        self.send(
            &response.type_url,
            names,
            &response.version_info,
            &response.nonce,
        )
        .await;
    }

    async fn send_request(&self, request: DiscoveryRequest) {
        self.requests
            .send(request)
            .await
            .expect("the stream takes requests");
    }

    /// The next response; panics when none comes in time.
    pub async fn next(&mut self) -> DiscoveryResponse {
        tokio::time::timeout(ANSWER, self.responses.message())
            .await
            .expect("a response in time")
            .expect("the stream is healthy")
            .expect("the stream is open")
    }

    /// The next response if one comes within `wait`.
    pub async fn next_within(&mut self, wait: Duration) -> Option<DiscoveryResponse> {
        tokio::time::timeout(wait, self.responses.message())
            .await
            .ok()
            .map(|r| {
                r.expect("the stream is healthy")
                    .expect("the stream is open")
            })
    }
}

fn request(type_url: &str, names: &[&str], version: &str, nonce: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        version_info: version.to_owned(),
        node: Some(Node {
            id: "test-client".into(),
            ..Default::default()
        }),
        resource_names: names.iter().map(|n| n.to_string()).collect(),
        type_url: type_url.to_owned(),
        response_nonce: nonce.to_owned(),
        ..Default::default()
    }
}

/// The `host:port`s in a response of load assignments, sorted.
pub fn addresses(response: &DiscoveryResponse) -> Vec<String> {
    assert_eq!(response.type_url, CLUSTER_LOAD_ASSIGNMENT);
    let mut out = Vec::new();
    for any in &response.resources {
        let cla = ClusterLoadAssignment::decode(any.value.as_slice()).expect("a load assignment");
        for locality in &cla.endpoints {
            for e in &locality.lb_endpoints {
                let Some(HostIdentifier::Endpoint(ep)) = &e.host_identifier else {
                    panic!("an endpoint address")
                };
                let Some(Address::SocketAddress(s)) =
                    ep.address.as_ref().and_then(|a| a.address.as_ref())
                else {
                    panic!("a socket address")
                };
                let Some(PortSpecifier::PortValue(port)) = s.port_specifier else {
                    panic!("a port")
                };
                out.push(format!("{}:{port}", s.address));
            }
        }
    }
    out.sort();
    out
}
