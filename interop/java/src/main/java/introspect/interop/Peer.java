package introspect.interop;

import helloworld.DubboGreeterTriple;
import helloworld.Greeter;
import helloworld.Helloworld.HelloReply;
import helloworld.Helloworld.HelloRequest;

import java.io.IOException;
import java.io.InputStream;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.dubbo.config.ApplicationConfig;
import org.apache.dubbo.config.ProtocolConfig;
import org.apache.dubbo.config.ReferenceConfig;
import org.apache.dubbo.config.RegistryConfig;
import org.apache.dubbo.config.ServiceConfig;
import org.apache.dubbo.config.bootstrap.DubboBootstrap;

/**
 * The smallest Dubbo Java peer: a provider or a consumer of {@code helloworld.Greeter} with
 * application-level service discovery only and MetadataServiceV2 over Triple.
 *
 * <pre>
 * provider --registry URL --app NAME --port PORT --metadata-port PORT
 * consumer --registry URL --app NAME [--provided-by APP] --calls N [--wait-seconds S] [--interval-ms MS]
 * </pre>
 *
 * The registry is a Dubbo registry URL ({@code etcd://h:p}, {@code zookeeper://h:p},
 * {@code nacos://h:p}). The provider prints {@code READY} once exported and registered, and
 * stops gracefully when its standard input closes. The consumer waits (at most the given
 * seconds) for a first answer, then makes N calls (pausing the given milliseconds after each)
 * and prints one line
 * {@code RESULT calls=N ok=K failed=F waited_ms=W message=...}; it exits 0 only when all N
 * succeeded.
 */
public final class Peer {
    private Peer() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> options = parse(args);
        String mode = args.length > 0 ? args[0] : "";
        // Discovery at the application level only, no state kept between runs.
        System.setProperty("dubbo.application.migration.step", "FORCE_APPLICATION");
        switch (mode) {
            case "provider" -> provider(options);
            case "consumer" -> System.exit(consumer(options));
            default -> {
                System.err.println("usage: provider|consumer --registry URL --app NAME ...");
                System.exit(2);
            }
        }
    }

    /** The application: instance registration only, MetadataServiceV2 over tri, no QoS, no file cache. */
    private static ApplicationConfig application(Map<String, String> options) {
        ApplicationConfig application = new ApplicationConfig(need(options, "app"));
        application.setQosEnable(false);
        application.setRegisterMode("instance");
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
        RegistryConfig registry = new RegistryConfig(need(options, "registry"));
        registry.setRegisterMode("instance");
        Map<String, String> parameters = new HashMap<>();
        parameters.put("registry-type", "service");
        registry.setParameters(parameters);
        registry.setUseAsConfigCenter(false);
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
        service.setRef(new CountingGreeter());
        DubboBootstrap bootstrap = DubboBootstrap.getInstance()
                .application(application(options))
                .registry(registry(options))
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
        int calls = Integer.parseInt(need(options, "calls"));
        long waitMillis = Long.parseLong(options.getOrDefault("wait-seconds", "60")) * 1000;
        long intervalMillis = Long.parseLong(options.getOrDefault("interval-ms", "0"));
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
        reference.setParameters(parameters);
        DubboBootstrap bootstrap = DubboBootstrap.getInstance()
                .application(application(options))
                .registry(registry(options))
                .reference(reference)
                .start();
        Greeter greeter = reference.get();
        HelloRequest request = HelloRequest.newBuilder().setName("dubbo-java").build();

        // Discovery takes a moment: wait for the first answer, bounded.
        long started = System.currentTimeMillis();
        String message = null;
        String lastError = "";
        while (message == null && System.currentTimeMillis() - started < waitMillis) {
            try {
                message = greeter.sayHello(request).getMessage();
            } catch (RuntimeException e) {
                lastError = e.getClass().getSimpleName() + ": " + firstLine(e.getMessage());
                sleep(200);
            }
        }
        long waited = System.currentTimeMillis() - started;
        long ok = 0;
        long failed = 0;
        if (message == null) {
            System.err.println("no answer within " + waitMillis + " ms: " + lastError);
            failed = calls;
        } else {
            for (int i = 0; i < calls; i++) {
                if (i > 0 && intervalMillis > 0) {
                    sleep(intervalMillis);
                }
                try {
                    message = greeter.sayHello(request).getMessage();
                    ok++;
                } catch (RuntimeException e) {
                    failed++;
                    System.err.println("call failed: " + firstLine(e.getMessage()));
                }
            }
        }
        System.out.println("RESULT calls=" + calls + " ok=" + ok + " failed=" + failed + " waited_ms=" + waited
                + " message=" + message);
        System.out.flush();
        bootstrap.stop();
        return failed == 0 && ok == calls ? 0 : 1;
    }

    /** Answers naming this peer, and counts the calls. */
    static final class CountingGreeter extends DubboGreeterTriple.GreeterImplBase {
        private final AtomicLong calls = new AtomicLong();

        @Override
        public HelloReply sayHello(HelloRequest request) {
            calls.incrementAndGet();
            return HelloReply.newBuilder()
                    .setMessage("Hello " + request.getName() + " from dubbo-java")
                    .build();
        }
    }

    private static Map<String, String> parse(String[] args) {
        Map<String, String> options = new HashMap<>();
        for (int i = 1; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("expected an option, got " + args[i]);
            }
            options.put(args[i].substring(2), args[i + 1]);
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
