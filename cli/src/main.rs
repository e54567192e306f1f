//! `introspect`: run the demo, and see what is registered without writing code.

mod output;
mod route;
mod rule_cmd;
mod xds;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use introspect::backend::InstanceRead;
use introspect::consumer::MigrationStep;
use introspect::consumer::{Resolver, RouteQuery, SnapshotOptions, SubscribeOptions, Subscription};
use introspect::governance::CallTag;
use introspect::governance::migration::{Level, LevelChoice, StepSource};
use introspect::metrics::Metrics;
use introspect::{Error, Layout, Limits};
use introspect_cli::demo::DemoOptions;
use introspect_cli::store::StoreArgs;
use introspect_cli::{revision, unreadable};
use output::Output;

/// Application-level service discovery: inspect registered apps, instances, revisions,
/// metadata and mappings, resolve interfaces, or run the demo.
#[derive(Parser)]
#[command(
    name = "introspect",
    version,
    after_help = "Examples:\n  \
        introspect demo                               # 100 + 5 providers, 3 revisions, 3 fetches\n  \
        introspect --registry zookeeper://127.0.0.1:2181 apps\n  \
        introspect --registry nacos://127.0.0.1:8848 apps\n  \
        introspect --etcd http://127.0.0.1:2379 apps\n  \
        INTROSPECT_ETCD=https://10.0.0.2:2379 introspect --cacert ca.pem --user reader apps\n  \
        introspect --etcd http://127.0.0.1:2379 instances shop-orders\n  \
        introspect --etcd http://127.0.0.1:2379 resolve shop.OrderService --version 1.0\n  \
        introspect --etcd http://127.0.0.1:2379 --json metadata shop-orders\n  \
        introspect --etcd http://127.0.0.1:2379 revision shop-orders  # why revisions differ\n  \
        introspect --etcd http://127.0.0.1:2379 watch shop.OrderService\n  \
        introspect --etcd http://127.0.0.1:2379 consumers shop.OrderService  # who routes to what\n  \
        introspect --etcd http://127.0.0.1:2379 xds --listen 127.0.0.1:18000  # for any gRPC client\n  \
        introspect --etcd http://127.0.0.1:2379 console --listen 127.0.0.1:8080  # live web console\n  \
        introspect rule check shop.tag-router.yaml --key shop.tag-router  # offline\n  \
        introspect --registry zookeeper://127.0.0.1:2181 rule put shop.tag-router shop.tag-router.yaml\n\n\
        The registry is --registry URL (INTROSPECT_REGISTRY: zookeeper://, nacos://, etcd://,\n\
        memory://) or etcd at --etcd (INTROSPECT_ETCD); the password of --user comes from\n\
        INTROSPECT_PASSWORD or a prompt. The demo runs on the embedded store unless given one."
)]
struct Cli {
    #[command(flatten)]
    store: StoreArgs,

    /// Key namespace such as `/staging` on etcd (default: none; ZooKeeper takes ?group= in
    /// its URL).
    #[arg(long, global = true, default_value = "")]
    namespace: String,

    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a fleet of providers on loopback and resolve them: one fetch per revision.
    Demo {
        /// Instances of shop-orders in the first configuration group.
        #[arg(long, default_value_t = 60)]
        blue: usize,
        /// Instances of shop-orders in the second configuration group.
        #[arg(long, default_value_t = 40)]
        green: usize,
        /// Instances of shop-payments.
        #[arg(long, default_value_t = 5)]
        payments: usize,
        /// Keep the providers registered until Ctrl-C or SIGTERM, to inspect them with other commands.
        #[arg(long)]
        hold: bool,
        /// Serve Prometheus metrics at http://ADDR/metrics (pair with --hold to scrape).
        #[arg(long, value_name = "ADDR")]
        metrics: Option<std::net::SocketAddr>,
    },
    /// Registered apps with instance counts and revisions.
    Apps,
    /// The instances of an app.
    Instances {
        /// The app name.
        app: String,
    },
    /// The metadata of an app's revision (default: the revision most instances have).
    Metadata {
        /// The app name.
        app: String,
        /// The revision.
        revision: Option<String>,
    },
    /// Why an app's instances have the revisions they have: each revision's canonical form
    /// under every rule, and which services and params differ between revisions.
    Revision {
        /// The app name.
        app: String,
        /// A revision (default: every live revision, most instances first).
        revision_a: Option<String>,
        /// A second revision, to compare with the first.
        revision_b: Option<String>,
    },
    /// The apps exporting an interface.
    Mapping {
        /// The interface name.
        interface: String,
    },
    /// The endpoints of an interface.
    Resolve(Target),
    /// The consumers whose records say they subscribe to an interface: host, app, id, how
    /// long registered, endpoints, digest, registry position, whether the digest is the
    /// tool's own digest of that subscription now (same/different), and whether it routes
    /// by the rules the config centre holds now for its app (same/different/unknown).
    Consumers {
        /// The interface name.
        interface: String,
    },
    /// Where a call to an interface would go, as a balanced channel routes it: each
    /// provider routed or not, by which rule (its config-centre key) or parameter, and its
    /// effective weight now (warm-up applied); the rules in force, and those refused or
    /// not applied; and, when no provider is routed, that every such call fails and why.
    Route {
        #[command(flatten)]
        target: Target,
        /// The consumer's app (its `{app}.configurators` and `{app}.condition-router`).
        #[arg(long)]
        consumer_app: Option<String>,
        /// The consumer's host, as rules' `addresses` match it (default: this machine's).
        #[arg(long)]
        consumer_host: Option<String>,
        /// A parameter of the consumer's own URL, as a condition rule's `when` side and
        /// `$KEY` read it, `KEY=VALUE`; repeatable (`interface`, `version`, `group`,
        /// `side`, `protocol`, `application` and `dubbo.tag` are set already).
        #[arg(long = "consumer-param", value_name = "KEY=VALUE")]
        consumer_params: Vec<String>,
        /// The method called.
        #[arg(long)]
        method: Option<String>,
        /// A request header (attachment) the call carries, `NAME=VALUE`; repeatable.
        #[arg(long = "header", value_name = "NAME=VALUE")]
        headers: Vec<String>,
        /// The call's tag (`dubbo.tag`).
        #[arg(long)]
        tag: Option<String>,
        /// The tag is forced (`dubbo.force.tag=true`).
        #[arg(long)]
        force_tag: bool,
        /// Exit non-zero when every such call fails (no provider routed), as a script's
        /// check; without it the report says so and the exit is 0.
        #[arg(long)]
        check: bool,
    },
    /// Follow the endpoints of an interface, printing each change until Ctrl-C or SIGTERM.
    Watch {
        #[command(flatten)]
        target: Target,
        /// Serve Prometheus metrics at http://ADDR/metrics while watching.
        #[arg(long, value_name = "ADDR")]
        metrics: Option<std::net::SocketAddr>,
        /// Keep a snapshot of the endpoints in DIR: a watch started while the registry is
        /// down shows the last ones known, then follows the registry once it answers.
        #[arg(long, value_name = "DIR")]
        snapshot: Option<std::path::PathBuf>,
    },
    /// Serve the registry's gRPC services over xDS (ADS) to gRPC clients and Envoy.
    Xds(xds::XdsArgs),
    /// Serve a live web console of the fleet: read-only on loopback without a token; with
    /// one (--token-env), a logged-in person can disable, enable, weigh and tag instances.
    Console(introspect_cli::console::ConsoleArgs),
    /// Read, write, list and check governance rules where dubbo-admin writes them (the
    /// registry's config centre): every write is checked first and compare-and-set.
    #[command(subcommand)]
    Rule(rule_cmd::RuleCommand),
}

/// An interface and its optional qualifiers.
#[derive(Args)]
struct Target {
    /// The interface name.
    interface: String,
    /// Only this group.
    #[arg(long)]
    group: Option<String>,
    /// Only this version.
    #[arg(long)]
    version: Option<String>,
    /// Only this protocol.
    #[arg(long)]
    protocol: Option<String>,
    /// Apps providing the interface (skips the mapping), comma-separated.
    #[arg(long, value_delimiter = ',')]
    provided_by: Vec<String>,
    /// Which level to read, as Dubbo's `migration.step` names it: FORCE_APPLICATION (the
    /// application level: instances, mapping, metadata), FORCE_INTERFACE (the
    /// interface-level provider URLs of ZooKeeper, Nacos and etcd) or APPLICATION_FIRST
    /// (the application level when it has an endpoint, else the interface level).
    /// Default, as Dubbo Java's: APPLICATION_FIRST where the registry has an interface
    /// level, FORCE_APPLICATION on the memory store.
    #[arg(long, value_name = "STEP")]
    migration_step: Option<introspect::MigrationStep>,
}

impl Target {
    /// Whether its step reads the interface level (then `resolve` reads through the
    /// resolver; the application level alone through the unreadable-app check).
    fn reads_interface_level(&self) -> bool {
        self.migration_step
            .is_some_and(introspect::MigrationStep::reads_interface)
    }

    fn subscription(&self) -> Subscription {
        let mut s =
            Subscription::new(&self.interface).provided_by(self.provided_by.iter().cloned());
        s.group = self.group.clone();
        s.version = self.version.clone();
        s.protocol = self.protocol.clone();
        s.migration = self.migration_step;
        s
    }
}

/// The log filter when `RUST_LOG` names none: warnings, and for a one-shot command none
/// of the Nacos SDK's (an unreachable server logs a multi-line error for each retry before
/// the command's own one-line error says the same). `RUST_LOG=nacos_sdk=warn` shows them.
fn default_log_filter(command: &Command) -> &'static str {
    let long_running = matches!(
        command,
        Command::Watch { .. }
            | Command::Console(_)
            | Command::Xds(_)
            | Command::Demo { hold: true, .. }
    );
    if long_running {
        "warn"
    } else {
        "warn,nacos_sdk=off"
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = default_log_filter(&cli.command);
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| filter.into()),
        )
        .with_writer(std::io::stderr)
        // Colours only on a terminal: a log redirected to a file stays plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        // `introspect ... | head`: the reader has gone, so stop quietly.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            let mut stderr = std::io::stderr();
            let _ = writeln!(stderr, "error: {e}");
            // A write that lost shows what won, so nothing is lost to the operator.
            if let Error::Conflict {
                current: Some(item),
                ..
            } = &e
            {
                let _ = writeln!(stderr, "current rule (version {}):", item.version);
                let _ = writeln!(stderr, "{}", item.content.trim_end());
            }
            ExitCode::FAILURE
        }
    }
}

/// The error for an app with no instance record at all.
fn no_instances(app: &str) -> Error {
    Error::NotFound(format!(
        "app {app:?} has no instances (`introspect apps` lists the registered apps)"
    ))
}

/// What a watch shows of a level choice: a line whenever the level, the step, where it
/// comes from or a rule's waiting or refused move changes (not each count), for a
/// subscription that reads the interface level or follows a migration rule; nothing for
/// the common one that reads the application level alone by its own step.
type LevelShown = (
    Level,
    MigrationStep,
    StepSource,
    Option<MigrationStep>,
    Option<MigrationStep>,
);

fn show_level(
    out: &Output,
    choice: &LevelChoice,
    shown: &mut Option<LevelShown>,
) -> std::io::Result<()> {
    let now: LevelShown = (
        choice.level,
        choice.step,
        choice.source.clone(),
        choice.pending,
        choice.refused.as_ref().map(|(step, _)| *step),
    );
    let worth = choice.step.reads_interface() || matches!(choice.source, StepSource::Rule(_));
    if !worth || shown.as_ref() == Some(&now) {
        return Ok(());
    }
    *shown = Some(now);
    out.level_change(choice)
}

/// A watch whose set is empty says why on stderr, and keeps following.
fn say_why_empty(handle: &introspect::SubscriptionHandle) {
    if let Some(why) = handle.why_empty() {
        let _ = writeln!(std::io::stderr(), "no endpoints: {why}");
    }
}

fn is_broken_pipe(error: &Error) -> bool {
    matches!(error, Error::Io(e) if e.kind() == std::io::ErrorKind::BrokenPipe)
}

async fn run(cli: Cli) -> Result<(), Error> {
    // `rule check` works offline: no registry is opened.
    if let Command::Rule(rule_cmd::RuleCommand::Check { file, key }) = &cli.command {
        let key = key.as_ref().map(|k| k.display().to_string());
        return rule_cmd::check(&Output::new(cli.json), file, key.as_deref());
    }
    let mut store_args = cli.store.clone();
    // The demo fills a store of its own: the embedded one unless a registry is named.
    if matches!(cli.command, Command::Demo { .. })
        && store_args.etcd.is_none()
        && store_args.registry.is_none()
    {
        store_args.memory = true;
    }
    // A watch starts while the registry is down and follows it once it answers; one-shot
    // commands fail with a clear error when no server answers in time.
    let backend = if matches!(cli.command, Command::Watch { .. } | Command::Console(_)) {
        introspect_cli::store::open_following(&store_args).await?
    } else {
        introspect_cli::store::open(&store_args).await?
    };
    let layout = Layout::new(cli.namespace.clone())?;
    let backend = backend.with_layout(layout);
    let limits = Limits::default();
    let out = Output::new(cli.json);
    let instances = backend.instances().clone();
    let mut resolver = Resolver::builder(backend.clone());
    let consumer = match &cli.command {
        Command::Route {
            consumer_app,
            consumer_host,
            consumer_params,
            ..
        } => Some((consumer_app, consumer_host, consumer_params)),
        Command::Xds(args) => Some((
            &args.consumer_app,
            &args.consumer_host,
            &args.consumer_params,
        )),
        _ => None,
    };
    if let Some((consumer_app, consumer_host, consumer_params)) = consumer {
        for param in consumer_params {
            let (key, value) = param.split_once('=').ok_or_else(|| {
                Error::config(format!("--consumer-param {param:?}: expected KEY=VALUE"))
            })?;
            resolver = resolver.consumer_param(key, value)?;
        }
        if let Some(app) = consumer_app {
            resolver = resolver.application(app.clone());
        }
        if let Some(host) = consumer_host {
            resolver = resolver.consumer_host(host.clone());
        }
    }
    if let Command::Watch {
        snapshot: Some(dir),
        ..
    } = &cli.command
    {
        let snapshot = SnapshotOptions::new(dir.clone());
        resolver = resolver.subscribe_options(SubscribeOptions::default().snapshot(snapshot));
    }
    let resolver = resolver.build();
    match &cli.command {
        Command::Demo {
            blue,
            green,
            payments,
            hold,
            metrics,
        } => {
            let options = DemoOptions {
                blue: *blue,
                green: *green,
                payments: *payments,
                hold: hold.then(|| {
                    Box::pin(async {
                        introspect::shutdown_signal().await;
                    }) as _
                }),
                metrics: *metrics,
                ..Default::default()
            };
            let report =
                introspect_cli::demo::run(backend, options, &mut std::io::stdout()).await?;
            if report.fetches as usize != report.revisions {
                return Err(Error::config(format!(
                    "expected one fetch per revision, made {} for {}",
                    report.fetches, report.revisions
                )));
            }
        }
        Command::Apps => out.apps(&instances.list_apps(&limits).await?)?,
        Command::Instances { app } => {
            let list = instances.list(app, InstanceRead::new(&limits)).await?;
            out.instances(&list)?;
            if let Some(error) = unreadable::check(app, &list) {
                return Err(error);
            }
            if list.instances.is_empty() {
                return Err(no_instances(app));
            }
        }
        Command::Metadata { app, revision } => {
            let list = instances.list(app, InstanceRead::new(&limits)).await?;
            if let Some(error) = unreadable::check(app, &list) {
                return Err(error);
            }
            let mut by_revision: BTreeMap<&str, Vec<_>> = BTreeMap::new();
            for i in list.instances.values() {
                by_revision.entry(i.revision()).or_default().push(i);
            }
            let revision = match revision {
                Some(r) => r.clone(),
                None => by_revision
                    .iter()
                    .max_by_key(|(_, members)| members.len())
                    .map(|(r, _)| (*r).to_owned())
                    .ok_or_else(|| no_instances(app))?,
            };
            let members = by_revision
                .get(revision.as_str())
                .cloned()
                .unwrap_or_default();
            if members.is_empty() {
                let present: Vec<&str> = by_revision.keys().copied().collect();
                return Err(Error::NotFound(format!(
                    "no instance of {app:?} has revision {revision}; its instances have {}",
                    present.join(", ")
                )));
            }
            out.metadata(&*resolver.metadata(app, &revision, &members).await?)?;
        }
        Command::Mapping { interface } => {
            let apps = backend.mapping().get(interface, &limits).await?;
            // Nothing found is an error, said once on stderr: stdout stays empty.
            if apps.is_empty() {
                return Err(Error::NotFound(format!(
                    "no app is mapped to {interface} (is the name spelled as the provider \
                     exports it, package included?)"
                )));
            }
            out.mapping(interface, &apps)?;
        }
        Command::Revision {
            app,
            revision_a,
            revision_b,
        } => {
            let asked: Vec<String> = revision_a.iter().chain(revision_b).cloned().collect();
            let report = revision::gather(&*instances, &resolver, app, &asked).await?;
            out.revisions(&report)?;
            if let Some(error) = report.revisions.into_iter().find_map(|v| v.fetched.err()) {
                return Err(error);
            }
        }
        Command::Resolve(target) if target.reads_interface_level() => {
            let subscription = target.subscription();
            let handle = resolver.subscribe(subscription.clone()).await?;
            let choice = handle.level();
            let in_use = handle.current();
            // APPLICATION_FIRST on the application level: the interface level stands by.
            // (On the interface level, the application level is empty: nothing stands by.)
            let standing_by = if choice.step.reads_interface() && choice.level == Level::Application
            {
                let mut interface_only = subscription.clone();
                interface_only.migration = Some(introspect::MigrationStep::ForceInterface);
                resolver.resolve(&interface_only).await.unwrap_or_default()
            } else {
                Vec::new()
            };
            out.levels(&choice, &in_use, &standing_by)?;
            if in_use.is_empty() {
                let why = resolver.explain(&subscription).await?;
                return Err(Error::NotFound(why.to_string()));
            }
        }
        Command::Resolve(target) => {
            let resolved =
                unreadable::resolve(&resolver, &*instances, &target.subscription()).await?;
            out.endpoints(&resolved.endpoints)?;
            if let Some(error) = resolved.unreadable {
                return Err(error);
            }
            if resolved.endpoints.is_empty() {
                let why = resolver.explain(&target.subscription()).await?;
                return Err(Error::NotFound(why.to_string()));
            }
        }
        Command::Consumers { interface } => {
            let report = introspect_cli::consumers::gather(&resolver, interface).await?;
            out.consumers(&report)?;
        }
        Command::Watch {
            target, metrics, ..
        } => {
            let mut handle = resolver.subscribe(target.subscription()).await?;
            let _metrics = match metrics {
                Some(addr) => {
                    let bound = introspect_cli::exporter::install(*addr)?;
                    let _ = writeln!(std::io::stderr(), "metrics at http://{bound}/metrics");
                    let publishing = Metrics::new().resolver(&resolver);
                    Some(publishing.spawn(introspect_cli::exporter::PUBLISH_INTERVAL))
                }
                None => None,
            };
            let mut shown = Vec::new();
            out.changes(&shown, &handle.current(), handle.protection_active())?;
            shown = handle.current().to_vec();
            if shown.is_empty() {
                say_why_empty(&handle);
            }
            let mut levels = handle.level_watch();
            let mut level_shown = None;
            show_level(&out, &levels.borrow_and_update(), &mut level_shown)?;
            let stop = introspect::shutdown_signal();
            tokio::pin!(stop);
            loop {
                tokio::select! {
                    () = &mut stop => break,
                    next = handle.changed() => {
                        let next = next?;
                        out.changes(&shown, &next, handle.protection_active())?;
                        shown = next.to_vec();
                        if shown.is_empty() {
                            say_why_empty(&handle);
                        }
                    }
                    Ok(()) = levels.changed() => {
                        let choice = levels.borrow_and_update().clone();
                        show_level(&out, &choice, &mut level_shown)?;
                    }
                }
            }
        }
        Command::Route {
            target,
            method,
            headers,
            tag,
            force_tag,
            check,
            ..
        } => {
            let mut query = RouteQuery {
                method: method.clone(),
                tag: CallTag::new(tag.as_deref().unwrap_or_default(), *force_tag),
                ..RouteQuery::default()
            };
            for header in headers {
                let (name, value) = header.split_once('=').ok_or_else(|| {
                    Error::config(format!("--header {header:?}: expected NAME=VALUE"))
                })?;
                query.headers.insert(name.to_owned(), value.to_owned());
            }
            let subscription = resolver.subscribe(target.subscription()).await?;
            let report = resolver.explain_route(&subscription, &query).await?;
            let group = introspect::backend::config::DEFAULT_GROUP;
            let keys = backend.config().list(group).await;
            let unread = introspect_cli::rule::readers::report(&backend, keys).await;
            // Which discovery level the providers come from, and why (the migration step).
            let level = subscription.level().to_string();
            let no_provider = if report.providers.is_empty() {
                Some(resolver.explain(&target.subscription()).await?.to_string())
            } else {
                None
            };
            let why_empty = route::why_empty(&report, no_provider);
            let warming = route::warming_up(&report);
            out.route(&report, &unread, &level, why_empty.as_deref(), warming)?;
            if let (true, Some(why)) = (*check, why_empty) {
                return Err(Error::NotFound(format!("every such call fails: {why}")));
            }
        }
        Command::Xds(args) => xds::run(resolver, args).await?,
        Command::Console(args) => introspect_cli::console::run(resolver, args).await?,
        Command::Rule(command) => rule_cmd::run(&out, &backend, command).await?,
    }
    Ok(())
}
