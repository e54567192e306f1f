//! The cluster stage of the balanced channel against real tonic servers on loopback: what
//! is retried (never-sent and declined attempts; the rest only for idempotent calls), on a
//! provider not tried yet, under the call's own retries, the replay bound and the retry
//! budget, and forking. Each provider logs the request names it processed, so a call
//! processed twice is seen.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use introspect::consumer::{
    BalancedChannel, ChannelHandle, ChannelOptions, Cluster, HealthOptions, RetryBudget,
};
use introspect::{MemoryStore, Resolver, Store, Subscription};
use tonic::{Code, Request, Response, Status};

use crate::support::greeter::pb::greeter_client::GreeterClient;
use crate::support::greeter::pb::greeter_server::{Greeter, GreeterServer};
use crate::support::greeter::pb::{HelloReply, HelloRequest};
use crate::support::killable::{GREETER, greeter_info};
use crate::support::records::Records;

/// What a provider does with a call.
#[derive(Clone, Copy, Debug)]
enum Behaviour {
    /// Processes it and answers.
    Answer,
    /// Declines it unprocessed, with this status (trailers-only, as tonic answers an error).
    Refuse(Code),
    /// Processes it, then fails it with this status.
    Fail(Code),
    /// Processes it and answers after this long.
    Slow(Duration),
}

/// A Greeter provider that behaves as told and logs what it processed.
#[derive(Clone)]
struct Behaving {
    behaviour: Behaviour,
    /// Names of the calls it processed, in order.
    processed: Arc<Mutex<Vec<String>>>,
    /// Calls it declined.
    refused: Arc<Mutex<u64>>,
    /// Request headers of the last call, as received.
    headers: Arc<Mutex<http::HeaderMap>>,
    /// Where every call arrived, in order (shared by the providers of a test that reads
    /// the order).
    arrivals: Arc<Mutex<Vec<SocketAddr>>>,
    address: SocketAddr,
}

#[tonic::async_trait]
impl Greeter for Behaving {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        *self.headers.lock().unwrap() = request.metadata().clone().into_headers();
        self.arrivals.lock().unwrap().push(self.address);
        let name = request.into_inner().name;
        if let Behaviour::Refuse(code) = self.behaviour {
            *self.refused.lock().unwrap() += 1;
            return Err(Status::new(code, "not here"));
        }
        self.processed.lock().unwrap().push(name.clone());
        match self.behaviour {
            Behaviour::Fail(code) => return Err(Status::new(code, "failed")),
            Behaviour::Slow(delay) => tokio::time::sleep(delay).await,
            Behaviour::Answer | Behaviour::Refuse(_) => {}
        }
        Ok(Response::new(HelloReply {
            message: format!("Hello {name} from {}", self.address),
        }))
    }
}

impl Behaving {
    fn processed(&self) -> Vec<String> {
        self.processed.lock().unwrap().clone()
    }

    fn refused(&self) -> u64 {
        *self.refused.lock().unwrap()
    }
}

/// Serves a provider of `behaviour` on a free port and registers it.
async fn provider(records: &Records, behaviour: Behaviour) -> Behaving {
    serve(records, behaviour, Arc::default(), &greeter_info("greeter")).await
}

/// Serves a provider of `behaviour` logging arrivals to `arrivals` on a free port, and
/// registers it as an instance of `info`.
async fn serve(
    records: &Records,
    behaviour: Behaviour,
    arrivals: Arc<Mutex<Vec<SocketAddr>>>,
    info: &introspect::MetadataInfo,
) -> Behaving {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let greeter = Behaving {
        behaviour,
        processed: Arc::default(),
        refused: Arc::default(),
        headers: Arc::default(),
        arrivals,
        address,
    };
    let server =
        tonic::transport::Server::builder().add_service(GreeterServer::new(greeter.clone()));
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    tokio::spawn(server.serve_with_incoming(incoming));
    records
        .register(&Records::instance(info, address.port()), None)
        .await;
    greeter
}

/// A store with the Greeter's metadata and mapping published.
async fn records() -> Records {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let records = Records::new(store);
    records.publish(&greeter_info("greeter")).await;
    records
}

/// A resolver whose channels do not record calls into health (nothing is set aside, so
/// failing providers keep being picked), subscribed to the Greeter with `expected`
/// endpoints, and a client over a channel with `options`.
async fn channel_client(
    records: &Records,
    expected: usize,
    options: ChannelOptions,
) -> (Resolver, GreeterClient<BalancedChannel>, ChannelHandle) {
    let resolver = Resolver::builder(records.store.clone())
        .health(HealthOptions::disabled())
        .build();
    let handle = resolver
        .subscribe(Subscription::new(GREETER))
        .await
        .unwrap();
    assert_eq!(handle.current().len(), expected);
    let (channel, channel_handle) = resolver
        .balanced_channel_with(&handle, options.passive_health(false))
        .unwrap();
    (resolver, GreeterClient::new(channel), channel_handle)
}

/// Makes `n` calls one after another, named `call-{i}`; the codes of those that failed.
async fn calls(
    client: &mut GreeterClient<BalancedChannel>,
    n: usize,
    name: impl Fn(usize) -> String,
) -> BTreeMap<String, Code> {
    let mut failed = BTreeMap::new();
    for i in 0..n {
        let mut request = Request::new(HelloRequest { name: name(i) });
        request.set_timeout(Duration::from_secs(5));
        if let Err(status) = client.say_hello(request).await {
            failed.insert(name(i), status.code());
        }
    }
    failed
}

fn named(i: usize) -> String {
    format!("call-{i}")
}

/// Every name processed by `providers`, with how many times.
fn processed_by(providers: &[&Behaving]) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    for provider in providers {
        for name in provider.processed() {
            *seen.entry(name).or_default() += 1;
        }
    }
    seen
}

#[tokio::test]
async fn calls_a_provider_declines_are_answered_by_another_and_processed_once() {
    let records = records().await;
    let refusing = provider(&records, Behaviour::Refuse(Code::Unavailable)).await;
    let unexported = provider(&records, Behaviour::Refuse(Code::Unimplemented)).await;
    let a = provider(&records, Behaviour::Answer).await;
    let b = provider(&records, Behaviour::Answer).await;
    // Half the providers decline: a budget above what that costs (the default one is
    // tested below).
    let options = ChannelOptions::default().retry_budget(RetryBudget::default().ratio(1.0));
    let (resolver, mut client, _handle) = channel_client(&records, 4, options).await;
    let failed = calls(&mut client, 400, named).await;
    assert!(failed.is_empty(), "{failed:?}");
    let seen = processed_by(&[&refusing, &unexported, &a, &b]);
    assert_eq!(seen.len(), 400, "every call processed");
    assert!(seen.values().all(|&n| n == 1), "none processed twice");
    let declined = refusing.refused() + unexported.refused();
    assert!(declined >= 100, "the decliners were picked: {declined}");
    let stats = resolver.stats().await;
    assert_eq!(stats.attempts_declined, declined);
    assert_eq!(
        stats.retries, declined,
        "each declined attempt retried once"
    );
    assert_eq!(stats.call_attempts, 400 + declined);
    assert_eq!(stats.retries_over_budget, 0);
}

#[tokio::test]
async fn a_provider_that_takes_no_connection_costs_no_call_even_without_retries() {
    let records = records().await;
    // A registered address where nothing listens.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let info = greeter_info("greeter");
    records
        .register(&Records::instance(&info, port), None)
        .await;
    let a = provider(&records, Behaviour::Answer).await;
    let b = provider(&records, Behaviour::Answer).await;
    let options = ChannelOptions::default().retries(0);
    let (resolver, mut client, _handle) = channel_client(&records, 3, options).await;
    let failed = calls(&mut client, 200, named).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(processed_by(&[&a, &b]).len(), 200);
    let stats = resolver.stats().await;
    assert!(stats.attempts_not_sent >= 10, "{stats:?}");
    assert_eq!(stats.retries, stats.attempts_not_sent);
}

#[tokio::test]
async fn other_failures_are_retried_only_for_idempotent_calls() {
    let records = records().await;
    let exhausted = provider(&records, Behaviour::Fail(Code::ResourceExhausted)).await;
    let good = provider(&records, Behaviour::Answer).await;
    let (_resolver, mut client, _handle) =
        channel_client(&records, 2, ChannelOptions::default()).await;
    let failed = calls(&mut client, 200, named).await;
    // Processed, then failed: never sent again unless the caller allows it.
    assert!(failed.len() > 40, "{}", failed.len());
    assert!(failed.values().all(|&c| c == Code::ResourceExhausted));
    assert_eq!(exhausted.processed().len(), failed.len());
    assert!(processed_by(&[&exhausted, &good]).values().all(|&n| n == 1));

    let options = ChannelOptions::default().idempotent("SayHello");
    let (_resolver, mut client, _handle) = channel_client(&records, 2, options).await;
    let failed = calls(&mut client, 200, |i| format!("again-{i}")).await;
    assert!(failed.is_empty(), "{failed:?}");
    let twice = exhausted
        .processed()
        .iter()
        .filter(|n| n.starts_with("again-"))
        .count();
    assert!(
        twice > 40,
        "the failed ones went to the other provider too: {twice}"
    );
}

#[tokio::test]
async fn a_call_sets_its_own_retries_and_the_header_is_not_sent() {
    let records = records().await;
    let refusing = provider(&records, Behaviour::Refuse(Code::Unavailable)).await;
    let good = provider(&records, Behaviour::Answer).await;
    let (_resolver, mut client, _handle) =
        channel_client(&records, 2, ChannelOptions::default()).await;
    let mut failed = 0;
    for i in 0..200 {
        let mut request = Request::new(HelloRequest { name: named(i) });
        request
            .metadata_mut()
            .insert("retries", "0".parse().unwrap());
        if client.say_hello(request).await.is_err() {
            failed += 1;
        }
    }
    assert_eq!(failed, refusing.refused(), "no declined call retried");
    assert!(failed > 40, "{failed}");
    assert!(!good.headers.lock().unwrap().contains_key("retries"));
    assert!(!refusing.headers.lock().unwrap().contains_key("retries"));
}

#[tokio::test]
async fn a_retry_never_goes_to_a_provider_the_call_tried() {
    let records = records().await;
    let mut refusing = Vec::new();
    for _ in 0..4 {
        refusing.push(provider(&records, Behaviour::Refuse(Code::Unavailable)).await);
    }
    let options = ChannelOptions::default()
        .retries(10)
        .retry_budget(RetryBudget::default().ratio(10.0));
    let (resolver, mut client, _handle) = channel_client(&records, 4, options).await;
    let failed = calls(&mut client, 50, named).await;
    assert_eq!(failed.len(), 50, "nobody answers");
    assert!(failed.values().all(|&c| c == Code::Unavailable));
    // Each call went to each provider exactly once, then gave up.
    for provider in &refusing {
        assert_eq!(provider.refused(), 50);
    }
    assert_eq!(resolver.stats().await.call_attempts, 200);
}

#[tokio::test]
async fn a_body_over_the_replay_bound_is_sent_once() {
    let records = records().await;
    let refusing = provider(&records, Behaviour::Refuse(Code::Unavailable)).await;
    let _good = provider(&records, Behaviour::Answer).await;
    let options = ChannelOptions::default().replay_limit(64);
    let (_resolver, mut client, _handle) = channel_client(&records, 2, options).await;
    let small = calls(&mut client, 100, named).await;
    assert!(small.is_empty(), "{small:?}");
    let before = refusing.refused();
    let large = calls(&mut client, 100, |i| format!("{i:0>100}")).await;
    assert!(!large.is_empty());
    assert_eq!(
        large.len() as u64,
        refusing.refused() - before,
        "none retried"
    );
}

#[tokio::test]
async fn retries_stay_within_the_budget() {
    let records = records().await;
    let refusing = provider(&records, Behaviour::Refuse(Code::Unavailable)).await;
    let mut good = Vec::new();
    for _ in 0..3 {
        good.push(provider(&records, Behaviour::Answer).await);
    }
    // A small budget: 10% of calls, 1 a second, over 2 s.
    let budget = RetryBudget::default()
        .ratio(0.1)
        .min_per_second(1)
        .ttl(Duration::from_secs(2));
    let options = ChannelOptions::default().retry_budget(budget);
    let (resolver, mut client, handle) = channel_client(&records, 4, options).await;
    let started = Instant::now();
    let failed = calls(&mut client, 2_000, named).await;
    let seconds = started.elapsed().as_secs_f64().ceil();
    let stats = resolver.stats().await;
    let made = 2_000.0;
    let sent = stats.call_attempts as f64;
    // Retries: at most 10% of calls plus the floor, plus the reserve at the start.
    assert!(
        sent <= made * 1.1 + seconds + 2.0,
        "{sent} attempts for {made} calls in {seconds} s"
    );
    assert!(stats.retries_over_budget > 0, "the budget refused some");
    assert_eq!(failed.len() as u64, stats.retries_over_budget);
    assert_eq!(refusing.refused(), stats.attempts_declined);
    assert!(handle.retry_budget_left() <= 10);
}

#[tokio::test]
async fn forking_takes_the_first_answer() {
    let records = records().await;
    let slow = provider(&records, Behaviour::Slow(Duration::from_millis(400))).await;
    let fast = provider(&records, Behaviour::Answer).await;
    let options = ChannelOptions::default().cluster(Cluster::Forking);
    let (_resolver, mut client, _handle) = channel_client(&records, 2, options).await;
    let started = Instant::now();
    let failed = calls(&mut client, 20, named).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert!(
        started.elapsed() < Duration::from_millis(20 * 400 / 2),
        "answered by the fast one: {:?}",
        started.elapsed()
    );
    assert_eq!(fast.processed().len(), 20, "every call went to both");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!slow.processed().is_empty());
}

#[tokio::test]
async fn a_provider_timeout_bounds_calls_that_set_none() {
    let records = records().await;
    let info = introspect::ServiceInfo::new(GREETER).with_param("timeout", "200");
    let timed = Records::metadata("timed", &[info]);
    records.publish(&timed).await;
    let slow = serve(
        &records,
        Behaviour::Slow(Duration::from_secs(3)),
        Arc::default(),
        &timed,
    )
    .await;
    let resolver = Resolver::new(records.store.clone());
    let handle = resolver
        .subscribe(Subscription::new(GREETER).provided_by(["timed"]))
        .await
        .unwrap();
    let (channel, _h) = resolver.balanced_channel(&handle).unwrap();
    let mut client = GreeterClient::new(channel);
    let started = Instant::now();
    let status = client
        .say_hello(Request::new(HelloRequest { name: "x".into() }))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let header = slow.headers.lock().unwrap().get("grpc-timeout").cloned();
    assert!(header.is_some(), "the provider is told the deadline");
}

/// Serves HTTP/2 on a free port, refusing every stream with `REFUSED_STREAM` (a server
/// over its concurrency limit says so); counts the streams refused.
async fn refusing_streams(records: &Records) -> Arc<Mutex<u64>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let refused: Arc<Mutex<u64>> = Arc::default();
    let counted = refused.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                let Ok(mut connection) = h2::server::handshake(socket).await else {
                    return;
                };
                while let Some(Ok((_request, mut respond))) = connection.accept().await {
                    *counted.lock().unwrap() += 1;
                    respond.send_reset(h2::Reason::REFUSED_STREAM);
                }
            });
        }
    });
    let info = greeter_info("greeter");
    records
        .register(&Records::instance(&info, port), None)
        .await;
    refused
}

#[tokio::test]
async fn a_refused_stream_goes_to_another_provider_even_without_retries() {
    let records = records().await;
    let refused = refusing_streams(&records).await;
    let good = provider(&records, Behaviour::Answer).await;
    let options = ChannelOptions::default().retries(0);
    let (resolver, mut client, _handle) = channel_client(&records, 2, options).await;
    let failed = calls(&mut client, 200, named).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(good.processed().len(), 200);
    let refused = *refused.lock().unwrap();
    assert!(refused > 40, "{refused}");
    assert_eq!(resolver.stats().await.attempts_not_sent, refused);
}

/// What dubbo-admin's retry and load-balancing pages write for a consumer app: a
/// `side: consumer` configurator.
const CONSUMER_CONFIGURATOR: &str = "configVersion: v3.0
scope: application
key: shop
enabled: true
configs:
  - side: consumer
    parameters:
      retries: 0
      loadbalance: roundrobin
";

#[tokio::test]
async fn a_consumer_configurator_turns_retries_off_and_picks_round_robin() {
    let store = Arc::new(MemoryStore::new());
    let backend = introspect::Backend::from(store.clone());
    let records = Records::new(store);
    let info = greeter_info("greeter");
    records.publish(&info).await;
    let arrivals: Arc<Mutex<Vec<SocketAddr>>> = Arc::default();
    let refusing = serve(
        &records,
        Behaviour::Refuse(Code::Unavailable),
        arrivals.clone(),
        &info,
    )
    .await;
    for _ in 0..3 {
        serve(&records, Behaviour::Answer, arrivals.clone(), &info).await;
    }
    let resolver = Resolver::builder(backend.clone())
        .application("shop")
        .health(HealthOptions::disabled())
        .build();
    let handle = resolver
        .subscribe(Subscription::new(GREETER))
        .await
        .unwrap();
    assert_eq!(handle.current().len(), 4);
    let options = ChannelOptions::default().passive_health(false);
    let (channel, _channel_handle) = resolver.balanced_channel_with(&handle, options).unwrap();
    let mut client = GreeterClient::new(channel);
    assert!(calls(&mut client, 100, named).await.is_empty(), "retried");

    crate::support::rules::put_rule(&backend, "shop.configurators", CONSUMER_CONFIGURATOR).await;
    crate::support::wait::eventually(Duration::from_secs(10), "the rule obeyed", || {
        let mut client = client.clone();
        async move {
            let request = Request::new(HelloRequest {
                name: "probe".into(),
            });
            client.say_hello(request).await.is_err()
        }
    })
    .await;
    arrivals.lock().unwrap().clear();
    let refused_before = refusing.refused();
    let failed = calls(&mut client, 200, |i| format!("ruled-{i}")).await;
    assert_eq!(
        failed.len() as u64,
        refusing.refused() - refused_before,
        "every declined call failed: no retry"
    );
    let order = arrivals.lock().unwrap().clone();
    assert_eq!(order.len(), 200);
    // Round robin: every four consecutive calls reach the four providers once each.
    for window in order.chunks(4) {
        let distinct: std::collections::BTreeSet<_> = window.iter().collect();
        assert_eq!(distinct.len(), 4, "{window:?}");
    }
    assert_eq!(failed.len(), 50);
}
