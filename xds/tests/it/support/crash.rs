//! A Greeter provider that can crash: it runs on a tokio runtime of its own, so shutting
//! that runtime down ends everything it runs at once (server, open connections, lease
//! keep-alive) without a deregistration, as a killed process would.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use introspect::{Provider, Store};

use super::greeter::pb::greeter_server::GreeterServer;
use super::greeter::{CountingGreeter, greeter_router, is_registered};
use super::wait::eventually;

/// A Greeter provider on a runtime of its own.
pub struct CrashableGreeter {
    /// Where it listens (and is registered).
    pub address: SocketAddr,
    runtime: tokio::runtime::Runtime,
}

impl CrashableGreeter {
    /// Starts one as an instance of `app` with a lease of `ttl`, and waits until it is
    /// registered.
    pub async fn start(store: &Arc<dyn Store>, app: &str, ttl: Duration) -> CrashableGreeter {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap();
        let provider = Provider::builder(app, store.clone())
            .lease_ttl(ttl)
            .export_service::<GreeterServer<CountingGreeter>>()
            .build()
            .expect("valid provider");
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let router = greeter_router(CountingGreeter::new(address));
            let _ = provider
                .serve(router, listener, std::future::pending::<()>())
                .await;
        });
        eventually(Duration::from_secs(5), "the greeter to register", || {
            is_registered(store, app, address)
        })
        .await;
        CrashableGreeter { address, runtime }
    }

    /// Crashes: every task of its runtime ends now; the record stays until its lease
    /// expires.
    pub fn crash(self) {
        self.runtime.shutdown_background();
    }
}
