//! A caller calling `SayHello` through a balanced channel in a loop, one call at a time,
//! counting every call.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use introspect::consumer::BalancedChannel;
use tokio::task::JoinHandle;

use super::greeter::pb::HelloRequest;
use super::greeter::pb::greeter_client::GreeterClient;

/// Each call's deadline.
pub const CALL_DEADLINE: Duration = Duration::from_secs(1);

/// See the module docs.
pub struct Caller {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    started: std::time::Instant,
    task: JoinHandle<Vec<String>>,
}

impl Caller {
    /// Calls every `pause` until [`finish`](Self::finish); each failure is kept with its
    /// time since the start, in milliseconds.
    pub fn start(channel: BalancedChannel, pause: Duration) -> Caller {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let (s, o, f) = (stop.clone(), ok.clone(), failed.clone());
        let started = std::time::Instant::now();
        let task = tokio::spawn(async move {
            let mut client = GreeterClient::new(channel);
            let mut errors = Vec::new();
            while !s.load(Ordering::Relaxed) {
                let mut request = tonic::Request::new(HelloRequest {
                    name: "caller".into(),
                });
                request.set_timeout(CALL_DEADLINE);
                // The outer bound only keeps a broken channel from hanging the test.
                let call = client.say_hello(request);
                match tokio::time::timeout(CALL_DEADLINE * 3, call).await {
                    Ok(Ok(_)) => {
                        o.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Err(status)) => {
                        f.fetch_add(1, Ordering::Relaxed);
                        errors.push(format!("at {} ms: {status}", started.elapsed().as_millis()));
                    }
                    Err(_) => {
                        f.fetch_add(1, Ordering::Relaxed);
                        errors.push(format!(
                            "at {} ms: call hung past its deadline",
                            started.elapsed().as_millis()
                        ));
                    }
                }
                tokio::time::sleep(pause).await;
            }
            errors
        });
        Caller {
            stop,
            ok,
            failed,
            started,
            task,
        }
    }

    /// Milliseconds since it started, the clock of its failures' times.
    pub fn elapsed_ms(&self) -> u128 {
        self.started.elapsed().as_millis()
    }

    /// Calls that succeeded so far.
    pub fn ok(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
    }

    /// Calls that failed so far.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Stops calling; returns (succeeded, failed, the failures' messages).
    pub async fn finish(self) -> (u64, u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let Caller {
            ok, failed, task, ..
        } = self;
        let errors = task.await.expect("caller task");
        (
            ok.load(Ordering::Relaxed),
            failed.load(Ordering::Relaxed),
            errors,
        )
    }
}

/// A balanced channel over `handle`, once its balancer knows `addresses` addresses (within
/// 20 s).
pub async fn channel_over(
    resolver: &introspect::Resolver,
    handle: &introspect::SubscriptionHandle,
    addresses: usize,
) -> BalancedChannel {
    let (channel, mut channel_handle) = resolver.balanced_channel(handle).unwrap();
    let known = async {
        while channel_handle.addresses().len() < addresses {
            channel_handle.changed().await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(20), known)
        .await
        .unwrap_or_else(|_| panic!("the channel learns {addresses} addresses"));
    channel
}

/// Makes `calls` calls one after another through `channel`, each with `headers`; how many
/// each of `answered` (the providers' call counters) answered meanwhile, and the errors.
pub async fn count_calls(
    channel: &BalancedChannel,
    answered: &[Arc<AtomicU64>],
    calls: u32,
    headers: &[(&'static str, &str)],
) -> (Vec<u64>, Vec<String>) {
    let before: Vec<u64> = answered.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let mut client = GreeterClient::new(channel.clone());
    let mut errors = Vec::new();
    for _ in 0..calls {
        let mut request = tonic::Request::new(HelloRequest { name: "r".into() });
        for (name, value) in headers {
            request.metadata_mut().insert(*name, value.parse().unwrap());
        }
        if let Err(status) = client.say_hello(request).await {
            errors.push(status.message().to_owned());
        }
    }
    let counts = answered
        .iter()
        .zip(before)
        .map(|(c, b)| c.load(Ordering::Relaxed) - b)
        .collect();
    (counts, errors)
}

/// Makes 60 calls at a time (as [`count_calls`]) until `check` is satisfied with what they
/// did; fails naming `what` when it is not within `limit`.
pub async fn calls_until(
    channel: &BalancedChannel,
    answered: &[Arc<AtomicU64>],
    headers: &[(&'static str, &str)],
    limit: Duration,
    what: &str,
    check: impl Fn(&[u64], &[String]) -> bool,
) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let (counts, errors) = count_calls(channel, answered, 60, headers).await;
        if check(&counts, &errors) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: still {counts:?}, errors {:?}",
            errors.first()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
