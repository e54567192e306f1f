package introspect.interop;

import helloworld.DubboGreeterTriple;
import helloworld.Greeter;
import helloworld.Helloworld.HelloReply;
import helloworld.Helloworld.HelloRequest;

import java.io.IOException;
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.dubbo.config.ApplicationConfig;
import org.apache.dubbo.config.ProtocolConfig;
import org.apache.dubbo.config.ReferenceConfig;
import org.apache.dubbo.config.RegistryConfig;
import org.apache.dubbo.config.ServiceConfig;
import org.apache.dubbo.config.bootstrap.DubboBootstrap;
import org.apache.dubbo.registry.client.migration.MigrationInvoker;
import org.apache.dubbo.rpc.Invoker;
import org.apache.dubbo.rpc.RpcContext;
import org.apache.dubbo.rpc.TriRpcStatus;
import org.apache.dubbo.rpc.cluster.ClusterInvoker;
import org.apache.dubbo.rpc.cluster.support.wrapper.ScopeClusterInvoker;

/**
 * The smallest Dubbo Java peer: a provider or a consumer of {@code helloworld.Greeter} with
 * application-level service discovery only and MetadataServiceV2 over Triple.
 *
 * <pre>
 * provider --registry URL --app NAME --port PORT --metadata-port PORT [--tag TAG] [--weight W] [--name NAME]
 *          [--warmup MS] [--config-centre] [--register-mode instance|interface|all] [--shutdown-wait-ms MS]
 *          [--slow-ms MS] [--fail-percent P] [--log-requests]
 * consumer --registry URL --app NAME [--provided-by APP] (--calls N | --duration-ms D [--calls N])
 *          [--wait-seconds S] [--interval-ms MS] [--concurrency C] [--name-prefix P]
 *          [--tag TAG] [--force-tag] [--config-centre] [--await-invokers N] [--log-calls]
 *          [--migration-step FORCE_APPLICATION|APPLICATION_FIRST|FORCE_INTERFACE|DEFAULT]
 *          [--retries N] [--timeout-ms MS] [--loadbalance NAME] [--cluster NAME]
 * bench --registry URL --app NAME --expect N [--provided-by APP] [--wait-seconds S] [--connect-timeout-ms MS]
 * </pre>
 *
 * The registry is a Dubbo registry URL ({@code etcd://h:p}, {@code zookeeper://h:p},
 * {@code nacos://h:p}). The provider prints {@code READY} once exported and registered, and
 * stops gracefully when its standard input closes. Its {@code --tag}, {@code --weight} and
 * {@code --warmup} are the service's static tag ({@code dubbo.tag}), weight and warm-up
 * (milliseconds during which consumers give a new provider a reduced weight; Dubbo's default
 * is 10 minutes, 0 turns it off), as a Java user sets them on a {@code ServiceConfig}; with {@code --name} its Greeter answers {@code Hello X from NAME}
 * instead of {@code Hello X from dubbo-java}. With {@code --config-centre} the provider uses
 * its registry as its config centre too, and so applies the {@code side: provider}
 * configurators there ({@code {app}.configurators} and {@code {interface}::.configurators}
 * in group {@code dubbo}): a rule that changes its parameters ({@code disabled},
 * {@code weight}) makes it publish a new revision. The consumer waits (at most the given
 * seconds) for a first answer, then makes N calls (pausing the given milliseconds after each)
 * and prints, for each distinct answer of those N calls, one line
 * {@code SHARE calls=C message=...} (how many calls it answered), then one line
 * {@code RESULT calls=N ok=K failed=F waited_ms=W message=...}; it exits 0 only when all N
 * succeeded. With {@code --tag} every call, the first too, carries the attachment
 * {@code dubbo.tag=TAG} (set on {@code RpcContext.getClientAttachment()} before each call, as
 * a Java user tags a call), and with {@code --force-tag} each of the N calls also
 * {@code dubbo.force.tag=true} (the first answer, which only says that discovery is done,
 * is asked for unforced: a forced tag may match no provider).
 *
 * <p>With {@code --config-centre} the consumer also uses its registry as its config centre and
 * so obeys the governance rules there (configurators, tag and condition routers, read from the
 * default group {@code dubbo}); without it, it reads none. With {@code --await-invokers N} it
 * does not wait for a first answer but until the reference's directory holds N invokers (a
 * rule may leave every call without a provider), then makes its N calls. With
 * {@code --log-calls} it prints one line per call,
 * {@code CALL at_ms=T latency_ms=L name=NAME message=...} or
 * {@code CALL at_ms=T latency_ms=L name=NAME failed=...} (T: the wall clock in epoch
 * milliseconds when the call returned; L: how long the call took, Dubbo's retries included;
 * NAME: the call's request name), so that a test can tell when a rule written during the run
 * took effect.
 *
 * <p>Fault and load options, for tests of fail-over (see {@code interop/README.md}). The
 * provider's {@code --slow-ms MS} makes every call sleep MS before it is answered (after it
 * is logged as processed); {@code --fail-percent P} (0 to 100) refuses that share of calls,
 * spread evenly over each caller's calls (the calls named {@code PREFIX-K} by one consumer's
 * {@code --name-prefix PREFIX} count as one caller's: of any hundred such calls in a row, P
 * are refused, so a test's outcome does not hang on a draw), with the gRPC status
 * {@code UNAVAILABLE} before they are processed (thrown
 * as {@code TriRpcStatus.UNAVAILABLE...asException()}, as a Triple service declares a
 * status), printing {@code REFUSED name=NAME} for each; {@code --log-requests} prints
 * {@code REQUEST name=NAME} (the request's name) for each call it processes. The consumer's
 * {@code --retries N} (default 0), {@code --timeout-ms MS} (default 3000),
 * {@code --loadbalance NAME} and {@code --cluster NAME} (Dubbo's defaults unless given) are
 * its reference's {@code retries}, {@code timeout}, {@code loadbalance} and {@code cluster}.
 * With {@code --concurrency C} (default 1) C threads make the calls at once. With
 * {@code --duration-ms D} it makes calls until D milliseconds have passed since its first
 * answer instead of a fixed number ({@code --calls}, then optional, caps them), and its
 * {@code RESULT}'s {@code calls=} is the number made. With {@code --name-prefix P} each call
 * asks for the name {@code P-K}, K counting the calls from 1, so that the providers'
 * {@code REQUEST} lines tell which call each processed (a call processed twice shows twice);
 * the discovery calls before them ask for {@code P-discovery-J}; its {@code SHARE} lines then
 * count the answers with each call's own name replaced by P ({@code Hello P from NAME}), so
 * they still say who answered how many. Without it every call asks for {@code dubbo-java}.
 *
 * <p>The provider's {@code --shutdown-wait-ms} is Dubbo's {@code dubbo.service.shutdown.wait}:
 * once deregistered on a stop, each service is unexported when it has been idle for a third of
 * it, or when it has passed.
 *
 * <p>The provider's {@code --register-mode} (default {@code instance}) is Dubbo's
 * {@code register-mode} of its application and registry: {@code interface} writes only the
 * interface-level URL ({@code /dubbo/{interface}/providers/{url}} on ZooKeeper, service
 * {@code providers:{interface}:{version}:{group}} on Nacos), {@code all} both levels. The
 * consumer's {@code --migration-step} (default {@code FORCE_APPLICATION}) is the step of its
 * reference ({@code migration.step}): {@code FORCE_INTERFACE} reads interface-level URLs
 * only; {@code DEFAULT} sets no step at all, so Dubbo's own default applies
 * ({@code APPLICATION_FIRST}). Any other mode or step than the defaults drops {@code registry-type=service}, which
 * would leave Dubbo only its application-level registry.
 *
 * <p>The bench role measures discovery alone and makes no call: with the application started
 * (registry connected) it prints {@code STARTED startup_ms=S rss_kb=R}, subscribes to the
 * Greeter, waits (at most the given seconds) until the reference's own directory holds N
 * addresses and prints one line
 * {@code BENCH addresses=N elapsed_ms=E rss_before_kb=B rss_after_kb=A startup_ms=S}; it exits
 * 0 only when it saw N addresses.
 */
public final class Peer {
    private Peer() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> options = parse(args);
        String mode = args.length > 0 ? args[0] : "";
        // Discovery at the application level only unless asked otherwise, no state kept
        // between runs.
        if (!javaDefaultStep(options)) {
            System.setProperty("dubbo.application.migration.step", migrationStep(options));
        }
        // How long a stopping provider waits for its consumers to go before it unexports
        // (Dubbo's own default, 10 s, unless --shutdown-wait-ms says otherwise).
        if (options.containsKey("shutdown-wait-ms")) {
            System.setProperty("dubbo.service.shutdown.wait", options.get("shutdown-wait-ms"));
        }
        switch (mode) {
            case "provider" -> provider(options);
            case "consumer" -> System.exit(consumer(options));
            case "bench" -> {
                // Halted, not stopped: a graceful stop of 2,000 invokers is not measured.
                int status = bench(options);
                System.out.flush();
                Runtime.getRuntime().halt(status);
            }
            default -> {
                System.err.println("usage: provider|consumer --registry URL --app NAME ...");
                System.exit(2);
            }
        }
    }

    /** The provider's register mode: {@code instance} unless {@code --register-mode} says otherwise. */
    private static String registerMode(Map<String, String> options) {
        return options.getOrDefault("register-mode", "instance");
    }

    /** The consumer's migration step: {@code FORCE_APPLICATION} unless {@code --migration-step} says otherwise. */
    private static String migrationStep(Map<String, String> options) {
        return options.getOrDefault("migration-step", "FORCE_APPLICATION");
    }

    /** Whether the consumer keeps Dubbo's own default step ({@code --migration-step DEFAULT}: {@code APPLICATION_FIRST}, no setting made). */
    private static boolean javaDefaultStep(Map<String, String> options) {
        return "DEFAULT".equals(migrationStep(options));
    }

    /** Whether the peer writes or reads interface-level URLs (see the class docs). */
    private static boolean interfaceLevel(Map<String, String> options) {
        return !"instance".equals(registerMode(options)) || !"FORCE_APPLICATION".equals(migrationStep(options));
    }

    /** The application: instance registration only (unless {@code --register-mode}), MetadataServiceV2 over tri, no QoS, no file cache. */
    private static ApplicationConfig application(Map<String, String> options) {
        ApplicationConfig application = new ApplicationConfig(need(options, "app"));
        application.setQosEnable(false);
        application.setRegisterMode(registerMode(options));
        application.setMetadataType("local");
        application.setMetadataServiceProtocol("tri");
        application.setOnlyUseMetadataV2(true);
        application.setEnableFileCache(false);
        if (options.containsKey("metadata-port")) {
            application.setMetadataServicePort(Integer.parseInt(options.get("metadata-port")));
        }
        return application;
    }

    /**
     * The registry, for application-level discovery only: {@code registry-type=service} makes
     * consumers use service discovery alone too (Dubbo's etcd extension has service discovery
     * under the name etcd, its interface-level registry under etcd3).
     */
    private static RegistryConfig registry(Map<String, String> options) {
        return registry(options, false);
    }

    /**
     * The registry, as {@link #registry(Map)}; with {@code configCentre} also the config centre
     * the governance rules are read from (for ZooKeeper, {@code /dubbo/config/dubbo/KEY}).
     */
    private static RegistryConfig registry(Map<String, String> options, boolean configCentre) {
        RegistryConfig registry = new RegistryConfig(need(options, "registry"));
        registry.setRegisterMode(registerMode(options));
        Map<String, String> parameters = new HashMap<>();
        if (!interfaceLevel(options)) {
            parameters.put("registry-type", "service");
        }
        registry.setParameters(parameters);
        registry.setUseAsConfigCenter(configCentre);
        // The registry doubles as the metadata report where Dubbo has one for it (ZooKeeper,
        // Nacos: the interface-app mapping is written and read there); none is released for
        // etcd.
        registry.setUseAsMetadataCenter(!need(options, "registry").startsWith("etcd"));
        return registry;
    }

    private static void provider(Map<String, String> options) throws IOException {
        ProtocolConfig protocol = new ProtocolConfig("tri", Integer.parseInt(need(options, "port")));
        protocol.setHost("127.0.0.1");
        ServiceConfig<Greeter> service = new ServiceConfig<>();
        service.setInterface(Greeter.class);
        int failPercent = Integer.parseInt(options.getOrDefault("fail-percent", "0"));
        if (failPercent < 0 || failPercent > 100) {
            throw new IllegalArgumentException("--fail-percent must be within 0 and 100, not " + failPercent);
        }
        service.setRef(new CountingGreeter(
                options.getOrDefault("name", "dubbo-java"),
                Long.parseLong(options.getOrDefault("slow-ms", "0")),
                failPercent,
                options.containsKey("log-requests")));
        if (options.containsKey("tag")) {
            service.setTag(options.get("tag"));
        }
        if (options.containsKey("weight")) {
            service.setWeight(Integer.parseInt(options.get("weight")));
        }
        if (options.containsKey("warmup")) {
            service.setWarmup(Integer.parseInt(options.get("warmup")));
        }
        DubboBootstrap bootstrap = DubboBootstrap.getInstance()
                .application(application(options))
                .registry(registry(options, options.containsKey("config-centre")))
                .protocol(protocol)
                .service(service)
                .start();
        System.out.println("READY");
        System.out.flush();
        // Runs until the launcher closes standard input (or the process is killed).
        InputStream in = System.in;
        while (in.read() >= 0) {
            // ignore anything written
        }
        bootstrap.stop();
        System.exit(0);
    }

    private static int consumer(Map<String, String> options) {
        // A fixed number of calls, or calls for a time (then --calls, if given, caps them).
        boolean timed = options.containsKey("duration-ms");
        if (!timed && !options.containsKey("calls")) {
            throw new IllegalArgumentException("missing --calls (or --duration-ms)");
        }
        long calls = options.containsKey("calls") ? Long.parseLong(options.get("calls")) : Long.MAX_VALUE;
        long durationMillis = timed ? Long.parseLong(options.get("duration-ms")) : 0;
        long waitMillis = Long.parseLong(options.getOrDefault("wait-seconds", "60")) * 1000;
        long intervalMillis = Long.parseLong(options.getOrDefault("interval-ms", "0"));
        int concurrency = Integer.parseInt(options.getOrDefault("concurrency", "1"));
        if (concurrency < 1) {
            throw new IllegalArgumentException("--concurrency must be at least 1");
        }
        String tag = options.get("tag");
        boolean forceTag = options.containsKey("force-tag");
        boolean configCentre = options.containsKey("config-centre");
        boolean logCalls = options.containsKey("log-calls");
        String namePrefix = options.get("name-prefix");
        int awaitInvokers = Integer.parseInt(options.getOrDefault("await-invokers", "0"));
        ReferenceConfig<Greeter> reference = new ReferenceConfig<>();
        reference.setInterface(Greeter.class);
        reference.setProtocol("tri");
        reference.setCheck(false);
        reference.setTimeout(Integer.parseInt(options.getOrDefault("timeout-ms", "3000")));
        reference.setRetries(Integer.parseInt(options.getOrDefault("retries", "0")));
        if (options.containsKey("loadbalance")) {
            reference.setLoadbalance(options.get("loadbalance"));
        }
        if (options.containsKey("cluster")) {
            reference.setCluster(options.get("cluster"));
        }
        if (options.containsKey("provided-by")) {
            reference.setProvidedBy(options.get("provided-by"));
        }
        Map<String, String> parameters = new HashMap<>();
        if (!javaDefaultStep(options)) {
            parameters.put("migration.step", migrationStep(options));
        }
        reference.setParameters(parameters);
        DubboBootstrap bootstrap = DubboBootstrap.getInstance()
                .application(application(options))
                .registry(registry(options, configCentre))
                .reference(reference)
                .start();
        Greeter greeter = reference.get();

        // Discovery takes a moment: wait for the first answer (or the invokers asked for),
        // bounded.
        long started = System.currentTimeMillis();
        String message = null;
        String lastError = "";
        if (awaitInvokers > 0) {
            int seen = addresses(reference.getInvoker());
            while (seen < awaitInvokers && System.currentTimeMillis() - started < waitMillis) {
                sleep(20);
                seen = addresses(reference.getInvoker());
            }
            if (seen >= awaitInvokers) {
                message = "";
            } else {
                lastError = "only " + seen + " of " + awaitInvokers + " invokers";
            }
        }
        long attempts = 0;
        while (message == null && System.currentTimeMillis() - started < waitMillis) {
            attempts++;
            String name = namePrefix == null ? "dubbo-java" : namePrefix + "-discovery-" + attempts;
            try {
                // Discovery is done once any provider answers the call: forced, the tag
                // could match none.
                tagNextCall(tag, false);
                message = greeter.sayHello(request(name)).getMessage();
            } catch (RuntimeException e) {
                lastError = e.getClass().getSimpleName() + ": " + firstLine(e.getMessage());
                sleep(200);
            }
        }
        long waited = System.currentTimeMillis() - started;
        AtomicLong ok = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        // Each distinct answer of the calls and how many calls it answered.
        Map<String, Long> shares = new ConcurrentHashMap<>();
        AtomicReference<String> last = new AtomicReference<>(message);
        long made;
        if (message == null) {
            System.err.println("no answer within " + waitMillis + " ms: " + lastError);
            failed.set(timed ? 0 : calls);
            made = timed ? 0 : calls;
        } else {
            long deadline = timed ? System.currentTimeMillis() + durationMillis : Long.MAX_VALUE;
            // Calls started (each takes a ticket; none past --calls) and the calls' names.
            AtomicLong tickets = new AtomicLong();
            AtomicLong sequence = new AtomicLong();
            Runnable worker = () -> {
                boolean first = true;
                while (System.currentTimeMillis() < deadline && tickets.getAndIncrement() < calls) {
                    if (!first && intervalMillis > 0) {
                        sleep(intervalMillis);
                        if (System.currentTimeMillis() >= deadline) {
                            break;
                        }
                    }
                    first = false;
                    String name = namePrefix == null ? "dubbo-java" : namePrefix + "-" + sequence.incrementAndGet();
                    long callStarted = System.nanoTime();
                    try {
                        tagNextCall(tag, forceTag);
                        String answer = greeter.sayHello(request(name)).getMessage();
                        long latency = (System.nanoTime() - callStarted) / 1_000_000;
                        // With named calls, answers are counted by who answered: the call's
                        // own name is replaced by the prefix.
                        shares.merge(namePrefix == null ? answer : answer.replace(name, namePrefix), 1L, Long::sum);
                        last.set(answer);
                        ok.incrementAndGet();
                        if (logCalls) {
                            say("CALL at_ms=" + System.currentTimeMillis() + " latency_ms=" + latency + " name=" + name
                                    + " message=" + answer);
                        }
                    } catch (RuntimeException e) {
                        long latency = (System.nanoTime() - callStarted) / 1_000_000;
                        failed.incrementAndGet();
                        System.err.println("call failed: " + firstLine(e.getMessage()));
                        if (logCalls) {
                            say("CALL at_ms=" + System.currentTimeMillis() + " latency_ms=" + latency + " name=" + name
                                    + " failed=" + firstLine(e.getMessage()));
                        }
                    }
                }
            };
            Thread[] threads = new Thread[concurrency];
            for (int i = 0; i < concurrency; i++) {
                threads[i] = new Thread(worker, "caller-" + i);
                threads[i].start();
            }
            for (Thread thread : threads) {
                try {
                    thread.join();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            made = timed ? ok.get() + failed.get() : calls;
        }
        new TreeMap<>(shares)
                .forEach((answer, count) -> System.out.println("SHARE calls=" + count + " message=" + answer));
        System.out.println("RESULT calls=" + made + " ok=" + ok.get() + " failed=" + failed.get() + " waited_ms="
                + waited + " message=" + last.get());
        System.out.flush();
        bootstrap.stop();
        return message != null && failed.get() == 0 && ok.get() == made ? 0 : 1;
    }

    /** The request of one call. */
    private static HelloRequest request(String name) {
        return HelloRequest.newBuilder().setName(name).build();
    }

    /**
     * Tags the next call as a Java user does: attachments of the client context, which Dubbo
     * hands to the invocation (the tag router reads {@code dubbo.tag} and
     * {@code dubbo.force.tag} there) and Triple sends as headers. Set before every call,
     * since Dubbo may clear the client context after one.
     */
    private static void tagNextCall(String tag, boolean force) {
        if (tag != null) {
            RpcContext.getClientAttachment().setAttachment("dubbo.tag", tag);
        }
        if (force) {
            RpcContext.getClientAttachment().setAttachment("dubbo.force.tag", "true");
        }
    }

    /**
     * Subscribes to the Greeter once the application is started and waits until the
     * reference's directory lists {@code --expect} addresses (see the class docs).
     */
    private static int bench(Map<String, String> options) throws IOException {
        int expect = Integer.parseInt(need(options, "expect"));
        long waitMillis = Long.parseLong(options.getOrDefault("wait-seconds", "60")) * 1000;
        DubboBootstrap bootstrap = DubboBootstrap.getInstance()
                .application(application(options))
                .registry(registry(options))
                .start();
        ReferenceConfig<Greeter> reference = new ReferenceConfig<>();
        reference.setInterface(Greeter.class);
        reference.setProtocol("tri");
        reference.setCheck(false);
        reference.setTimeout(3000);
        reference.setRetries(0);
        if (options.containsKey("provided-by")) {
            reference.setProvidedBy(options.get("provided-by"));
        }
        Map<String, String> parameters = new HashMap<>();
        parameters.put("migration.step", "FORCE_APPLICATION");
        // Dubbo connects to every address as it makes its invoker, one after another, and
        // waits this long at an address that refuses (3 s by default).
        if (options.containsKey("connect-timeout-ms")) {
            parameters.put("connect.timeout", options.get("connect-timeout-ms"));
        }
        reference.setParameters(parameters);
        long startup = ManagementFactory.getRuntimeMXBean().getUptime();
        long before = rssKb();
        System.out.println("STARTED startup_ms=" + startup + " rss_kb=" + before);
        System.out.flush();

        long started = System.nanoTime();
        bootstrap.reference(reference);
        reference.get();
        long deadline = started + waitMillis * 1_000_000;
        int seen = addresses(reference.getInvoker());
        while (seen < expect && System.nanoTime() < deadline) {
            sleep(2);
            seen = addresses(reference.getInvoker());
        }
        long elapsed = (System.nanoTime() - started) / 1_000_000;
        long after = rssKb();
        System.out.println("BENCH addresses=" + seen + " elapsed_ms=" + elapsed + " rss_before_kb=" + before
                + " rss_after_kb=" + after + " startup_ms=" + startup);
        if (seen < expect) {
            System.err.println("only " + seen + " of " + expect + " addresses within " + waitMillis + " ms");
            return 1;
        }
        return 0;
    }

    /** The addresses the directory under a reference's invoker lists (0 before it has one). */
    private static int addresses(Invoker<?> invoker) {
        if (invoker instanceof ScopeClusterInvoker<?> scope) {
            return addresses(scope.getInvoker());
        }
        if (invoker instanceof MigrationInvoker<?> migration) {
            // The application-level invoker; under FORCE_INTERFACE only the interface-level one.
            ClusterInvoker<?> discovery = migration.getServiceDiscoveryInvoker();
            if (discovery == null) {
                discovery = migration.getInvoker();
            }
            return discovery == null || discovery.getDirectory() == null
                    ? 0
                    : discovery.getDirectory().getAllInvokers().size();
        }
        if (invoker instanceof ClusterInvoker<?> cluster && cluster.getDirectory() != null) {
            return cluster.getDirectory().getAllInvokers().size();
        }
        return 0;
    }

    /** The process's resident set (VmRSS of /proc/self/status) in KiB, 0 if unknown. */
    private static long rssKb() throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.substring(6).replace("kB", "").trim());
            }
        }
        return 0;
    }

    /**
     * Answers naming this peer (by default {@code dubbo-java}), and counts the calls; the fault
     * modes of {@code --fail-percent} and {@code --slow-ms}, and {@code --log-requests}, are
     * applied here (see the class docs).
     */
    static final class CountingGreeter extends DubboGreeterTriple.GreeterImplBase {
        private final AtomicLong calls = new AtomicLong();
        /** Calls seen per caller (a call's name up to its last {@code -}), for {@code --fail-percent}. */
        private final Map<String, AtomicLong> seenByCaller = new ConcurrentHashMap<>();
        private final String name;
        private final long slowMillis;
        private final int failPercent;
        private final boolean logRequests;

        CountingGreeter(String name, long slowMillis, int failPercent, boolean logRequests) {
            this.name = name;
            this.slowMillis = slowMillis;
            this.failPercent = failPercent;
            this.logRequests = logRequests;
        }

        /**
         * Whether this caller's next call is one of the refused share: the k-th call is
         * refused when it carries the count of refused calls, k * P / 100 rounded down, one
         * further (so P = 30 refuses the calls numbered 3, 6, 9, 13, 16, 19, ... from 0).
         */
        private boolean refuses(String callName) {
            int dash = callName.lastIndexOf('-');
            String caller = dash < 0 ? callName : callName.substring(0, dash);
            long k = seenByCaller.computeIfAbsent(caller, c -> new AtomicLong()).getAndIncrement();
            return (k + 1) * failPercent / 100 > k * failPercent / 100;
        }

        @Override
        public HelloReply sayHello(HelloRequest request) {
            // Refused before it is processed: as a provider that cannot take the call now,
            // with the status a Triple service declares (not processed, so not counted).
            if (failPercent > 0 && refuses(request.getName())) {
                say("REFUSED name=" + request.getName());
                throw TriRpcStatus.UNAVAILABLE
                        .withDescription(name + " refused the call (--fail-percent " + failPercent + ")")
                        .asException();
            }
            calls.incrementAndGet();
            if (logRequests) {
                say("REQUEST name=" + request.getName());
            }
            if (slowMillis > 0) {
                sleep(slowMillis);
            }
            return HelloReply.newBuilder()
                    .setMessage("Hello " + request.getName() + " from " + name)
                    .build();
        }
    }

    /** Prints one line to standard output and flushes it, whole among the lines of other threads. */
    private static void say(String line) {
        synchronized (System.out) {
            System.out.println(line);
            System.out.flush();
        }
    }

    /** Options that take no value. */
    private static final Set<String> FLAGS = Set.of("force-tag", "config-centre", "log-calls", "log-requests");

    private static Map<String, String> parse(String[] args) {
        Map<String, String> options = new HashMap<>();
        int i = 1;
        while (i < args.length) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("expected an option, got " + args[i]);
            }
            String name = args[i].substring(2);
            if (FLAGS.contains(name)) {
                options.put(name, "true");
                i += 1;
            } else if (i + 1 < args.length) {
                options.put(name, args[i + 1]);
                i += 2;
            } else {
                throw new IllegalArgumentException("no value for " + args[i]);
            }
        }
        return options;
    }

    private static String need(Map<String, String> options, String name) {
        String value = options.get(name);
        if (value == null) {
            throw new IllegalArgumentException("missing --" + name);
        }
        return value;
    }

    private static String firstLine(String text) {
        if (text == null) {
            return "";
        }
        int end = text.indexOf('\n');
        return end < 0 ? text : text.substring(0, end);
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
