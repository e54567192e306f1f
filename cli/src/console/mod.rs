//! `introspect console`: a live web console of the fleet over any registry, read-only
//! unless it has a token; with one, a logged-in person can disable, enable, weigh and tag
//! single instances, each action written as dubbo-admin writes it and kept in an action
//! log.
//!
//! One page (HTML, JS and CSS embedded in the binary, nothing fetched at run time) over a
//! JSON API under `/api/`:
//!
//! * `GET /api/apps`: every app with its instance count, revisions and their share, how
//!   many instances are disabled, held by the protections and set aside by health;
//! * `GET /api/app?name=APP[&offset=N&limit=N][&a=REV&b=REV]`: one app's instances (a
//!   page of them) by revision, each revision's exported services, its holds with time
//!   left, its change log, and with `a` and `b` the difference of two revisions (what
//!   `introspect revision APP A B` prints);
//! * `GET /api/service?name=IFACE[&group=G&version=V&protocol=P]`: the apps the mapping
//!   names and the endpoints a consumer gets (what `introspect resolve` prints); beside
//!   them the interface level's provider URLs (`interface_level`) and where the interface
//!   stands in a migration (`migration`: `application`, `both`, `interface-only`, `none`);
//! * `GET /api/consumers[?interface=IFACE|app=APP]`: the consumers that registered a
//!   record (of an interface, or routing to an app), each subscription's digest compared
//!   with the console's own: same, different, or stale (see [`audit`]); which level of
//!   discovery it reads and why (`level`, `step`, `step_rule`, `fallback`), and whether its
//!   providers are at the interface level only (`interface_only`);
//! * `GET /api/route?interface=IFACE[&group=G&version=V&protocol=P][&consumer_app=APP]
//!   [&method=M][&tag=T&force_tag=true]`: where a call would go now, as a balanced channel
//!   routes it under the config centre's rules (what `introspect route` prints): the rules
//!   in force, those not applied and why, and each provider's tag, state and weight;
//! * `GET /api/events`: server-sent events, one per change the resolver's own follows see;
//! * `POST /api/login` `{"token": "..."}`: exchanges the token for a session cookie (one
//!   session per login);
//! * `GET /api/session`: whether this caller may act, and its session's label;
//! * `GET /api/actions?app=APP`: what the app's rules say per instance in the forms the
//!   actions write (disabled addresses, weights, tags), with the rules' versions;
//! * `POST /api/actions/disable` and `POST /api/actions/enable` `{"app", "address"}`,
//!   `POST /api/actions/weight` `{"app", "address", "weight": 0..=10000 | null}`,
//!   `POST /api/actions/tag` `{"app", "address", "tag": NAME | null}`: one instance's
//!   governance, written by compare-and-set into `{app}.configurators` or
//!   `{app}.tag-router` (group `dubbo`) and merged with what is there (see
//!   [`crate::rule::instance`]); a console without a token refuses them (403);
//! * `GET /api/audit`: the action log, newest first: who (session label, client address),
//!   what (action, app, address, key, versions before and after), when, and the outcome.
//!
//! Everything comes from the resolver's public API: [`Resolver::list_apps`] finds apps,
//! [`Resolver::follow_app`] follows each (the same shared views and protections as its
//! subscriptions), [`Resolver::metadata`] and the resolve path answer the rest.
//!
//! Safe by default: it binds loopback unless told otherwise, and refuses any other address
//! without a token (read from the environment variable `--token-env` names, never from the
//! command line). See [`auth`] for the token and the cookie.
//!
//! * `auth`: the token, the sessions, the Host check;
//! * `actions`: the write actions, who may ask for them, compare-and-set with one retry;
//! * `action_log`: the bounded log of the actions (not to be confused with `audit`);
//! * `fleet`: what the console follows, and the change log;
//! * `audit`: the registered consumers, and which see a stale or different set;
//! * `bounded`: every string sent cut short;
//! * `api`: the JSON handlers and the event stream;
//! * `routing`: the route explanation of one interface;
//! * `shared`: what every handler reads, and how it answers;
//! * `assets`: the embedded page.

pub mod action_log;
mod actions;
mod api;
mod assets;
pub mod audit;
pub mod auth;
mod bounded;
mod fleet;
mod routing;
mod shared;

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use introspect::consumer::Resolver;
use introspect::{Error, Result};
use tokio::sync::oneshot;

/// How often the console looks for apps that appeared by default (their instances are then
/// followed live).
pub const DEFAULT_DISCOVER_EVERY: Duration = Duration::from_secs(2);

/// How often the console reads the consumer records by default.
pub const DEFAULT_AUDIT_EVERY: Duration = Duration::from_secs(2);

/// How long a consumer's digest may differ from the console's own before it is called
/// stale, by default: the records' refresh interval (at most one write per 10 s) and a
/// margin for the read.
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(15);

/// How long a stopping console lets requests in flight finish.
pub const STOP_GRACE: Duration = Duration::from_secs(2);

/// The arguments of `introspect console`.
#[derive(Args, Clone, Debug)]
pub struct ConsoleArgs {
    /// Where to serve the console (port 0: any free port, printed). An address other than
    /// loopback needs --token-env.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// The environment variable holding the access token (at least 16 characters). The page
    /// exchanges it once for a session cookie; scripts send `Authorization: Bearer TOKEN`.
    #[arg(long, value_name = "NAME")]
    pub token_env: Option<String>,
    /// Seconds between looks for apps that appeared (known apps follow live).
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_DISCOVER_EVERY.as_secs())]
    pub discover_every: u64,
}

/// How a console serves.
#[derive(Clone, Debug)]
pub struct ConsoleOptions {
    /// Where to serve.
    pub listen: SocketAddr,
    /// The access token; `None` serves without one, on loopback only.
    pub token: Option<String>,
    /// How often to look for apps that appeared.
    pub discover_every: Duration,
    /// How often to read the consumer records and compare their digests.
    pub audit_every: Duration,
    /// How long a consumer's digest may differ from the console's before it is stale.
    pub stale_after: Duration,
}

impl ConsoleOptions {
    /// Options to serve on `listen` without a token, every period at its default.
    pub fn new(listen: SocketAddr) -> Self {
        ConsoleOptions {
            listen,
            token: None,
            discover_every: DEFAULT_DISCOVER_EVERY,
            audit_every: DEFAULT_AUDIT_EVERY,
            stale_after: DEFAULT_STALE_AFTER,
        }
    }
}

impl ConsoleOptions {
    /// The options `args` give, reading the token from the variable `--token-env` names.
    pub fn from_args(args: &ConsoleArgs) -> Result<Self> {
        let token = match &args.token_env {
            Some(name) => Some(std::env::var(name).map_err(|_| {
                Error::config(format!(
                    "--token-env {name}: the environment variable {name} is not set (or not UTF-8)"
                ))
            })?),
            None => None,
        };
        Ok(ConsoleOptions {
            token,
            discover_every: Duration::from_secs(args.discover_every.max(1)),
            ..ConsoleOptions::new(args.listen)
        })
    }

    /// Refuses what would serve the fleet unprotected or guessably: a non-loopback address
    /// without a token, a short token.
    fn check(&self) -> Result<()> {
        match &self.token {
            None if !self.listen.ip().is_loopback() => Err(Error::config(format!(
                "refusing to serve the console on {} without a token: give --token-env NAME \
                 with the token in that environment variable, or listen on loopback",
                self.listen
            ))),
            Some(token) if token.chars().count() < auth::MIN_TOKEN_CHARS => {
                Err(Error::config(format!(
                    "the console token is too short: at least {} characters",
                    auth::MIN_TOKEN_CHARS
                )))
            }
            _ => Ok(()),
        }
    }
}

/// A running console; [`Console::stop`] ends it.
pub struct Console {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
    _fleet: fleet::Running,
}

impl Console {
    /// Where it serves.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops following and serving: open event streams end, requests in flight get up to
    /// [`STOP_GRACE`] to finish.
    pub async fn stop(self) {
        let Console {
            stop,
            mut served,
            _fleet: fleet,
            ..
        } = self;
        drop(fleet);
        if let Some(stop) = stop {
            let _ = stop.send(());
        }
        if tokio::time::timeout(STOP_GRACE, &mut served).await.is_err() {
            served.abort();
        }
    }
}

/// Starts a console over `resolver`: binds, starts following the fleet, serves. Fails on
/// unsafe options (see [`ConsoleOptions`]) or when the address cannot be bound.
pub async fn start(resolver: Resolver, options: ConsoleOptions) -> Result<Console> {
    options.check()?;
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|e| {
            Error::config(format!("cannot listen on {}: {e}", options.listen)).caused_by(e)
        })?;
    let addr = listener.local_addr()?;
    let (fleet, running) = fleet::Fleet::start(resolver, &options);
    let auth = Arc::new(auth::Auth::new(options.token.clone(), addr));
    let app = api::router(fleet, auth);
    let (stop, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(async {
            let _ = stopped.await;
        })
        .await
    });
    Ok(Console {
        addr,
        stop: Some(stop),
        served,
        _fleet: running,
    })
}

/// `introspect console`: serves until Ctrl-C or SIGTERM.
pub async fn run(resolver: Resolver, args: &ConsoleArgs) -> Result<()> {
    let options = ConsoleOptions::from_args(args)?;
    let console = start(resolver, options).await?;
    let mode = if args.token_env.is_some() {
        "actions after login"
    } else {
        "read-only"
    };
    let _ = writeln!(
        std::io::stderr(),
        "console at http://{}/ ({mode}; Ctrl-C or SIGTERM stops)",
        console.local_addr()
    );
    introspect::shutdown_signal().await;
    console.stop().await;
    Ok(())
}
