// The smallest dubbo-go 3.3 peer of the interop tests: a provider or a consumer of
// helloworld.Greeter (proto/helloworld.proto of the project, shared with the Rust and Java
// sides) with application-level service discovery and MetadataServiceV2 over Triple.
//
//	provider --registry URL --app NAME --port PORT --metadata-port PORT [--group G] [--version V]
//	consumer --registry URL --app NAME --calls N [--provided-by APP] [--wait-seconds S] [--interval-ms MS]
//	bench --registry URL --app NAME --expect N [--provided-by APP] [--wait-seconds S]
//
// The registry is a Dubbo registry URL (etcd://h:p, zookeeper://h:p, nacos://h:p). The
// provider prints READY once it serves and has registered, and stops when its standard input
// closes; with --group or --version it exports the Greeter in that group or version. The
// consumer waits (at most the given seconds) for a first answer, then makes N
// calls (pausing the given milliseconds after each) and prints one line "RESULT calls=N ok=K failed=F waited_ms=W message=..."; it exits
// 0 only when all N succeeded.
//
// The bench role measures discovery alone and makes no call: with the registry connected it
// prints "STARTED startup_ms=S rss_kb=R", subscribes to the Greeter, waits (at most the given
// seconds) until its own directory holds N addresses (counted by a router of its own, which
// the directory tells every address list) and prints one line
// "BENCH addresses=N elapsed_ms=E rss_before_kb=B rss_after_kb=A startup_ms=S"; it exits 0
// only when it saw N addresses.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"dubbo.apache.org/dubbo-go/v3"
	"dubbo.apache.org/dubbo-go/v3/client"
	"dubbo.apache.org/dubbo-go/v3/cluster/router"
	"dubbo.apache.org/dubbo-go/v3/common"
	"dubbo.apache.org/dubbo-go/v3/common/extension"
	"dubbo.apache.org/dubbo-go/v3/protocol"
	"dubbo.apache.org/dubbo-go/v3/protocol/base"
	"dubbo.apache.org/dubbo-go/v3/registry"
	"dubbo.apache.org/dubbo-go/v3/server"

	// Only what these two roles load by name (not the whole "imports" package): Triple,
	// the registries, service discovery and its metadata, the default filter chains, the
	// default cluster and load balance, the proxy.
	_ "dubbo.apache.org/dubbo-go/v3/cluster/cluster/failover"
	_ "dubbo.apache.org/dubbo-go/v3/cluster/loadbalance/random"
	_ "dubbo.apache.org/dubbo-go/v3/filter/accesslog"
	_ "dubbo.apache.org/dubbo-go/v3/filter/echo"
	_ "dubbo.apache.org/dubbo-go/v3/filter/exec_limit"
	_ "dubbo.apache.org/dubbo-go/v3/filter/generic"
	_ "dubbo.apache.org/dubbo-go/v3/filter/graceful_shutdown"
	_ "dubbo.apache.org/dubbo-go/v3/filter/token"
	_ "dubbo.apache.org/dubbo-go/v3/filter/tps"
	_ "dubbo.apache.org/dubbo-go/v3/metadata/mapping/metadata"
	_ "dubbo.apache.org/dubbo-go/v3/metadata/report/etcd"
	_ "dubbo.apache.org/dubbo-go/v3/metadata/report/nacos"
	_ "dubbo.apache.org/dubbo-go/v3/metadata/report/zookeeper"
	_ "dubbo.apache.org/dubbo-go/v3/protocol/triple"
	_ "dubbo.apache.org/dubbo-go/v3/proxy/proxy_factory"
	_ "dubbo.apache.org/dubbo-go/v3/registry/directory"
	_ "dubbo.apache.org/dubbo-go/v3/registry/etcdv3"
	_ "dubbo.apache.org/dubbo-go/v3/registry/nacos"
	_ "dubbo.apache.org/dubbo-go/v3/registry/protocol"
	_ "dubbo.apache.org/dubbo-go/v3/registry/servicediscovery"
	_ "dubbo.apache.org/dubbo-go/v3/registry/zookeeper"

	"introspect-interop/dubbo-go-peer/helloworld"
)

// processStarted is as close to the process's start as Go code gets (package initialisation).
var processStarted = time.Now()

func main() {
	if len(os.Args) < 2 {
		fail(2, "usage: provider|consumer --registry URL --app NAME ...")
	}
	mode := os.Args[1]
	flags := flag.NewFlagSet(mode, flag.ExitOnError)
	registryURL := flags.String("registry", "", "a Dubbo registry URL, e.g. etcd://127.0.0.1:2379")
	app := flags.String("app", "", "the application name")
	port := flags.Int("port", 0, "the Triple port (provider)")
	metadataPort := flags.Int("metadata-port", 0, "the MetadataService port")
	calls := flags.Int("calls", 10, "calls to make (consumer)")
	providedBy := flags.String("provided-by", "", "the provider app, skipping the mapping (consumer)")
	waitSeconds := flags.Int("wait-seconds", 60, "how long to wait for a first answer (consumer)")
	intervalMs := flags.Int("interval-ms", 0, "the pause after each call (consumer)")
	group := flags.String("group", "", "the Greeter's group (provider)")
	version := flags.String("version", "", "the Greeter's version (provider)")
	expect := flags.Int("expect", 0, "the addresses to wait for (bench)")
	registryType := flags.String("registry-type", "service", "what the provider registers: service (instances), interface (interface-level URLs) or all")
	_ = flags.Parse(os.Args[2:])
	if *registryURL == "" || *app == "" {
		fail(2, "--registry and --app are required")
	}

	options := []dubbo.InstanceOption{
		dubbo.WithName(*app),
		dubbo.WithRegistry(registryOptions(*registryURL, *registryType)...),
		dubbo.WithMetadataServiceProtocol("tri"),
	}
	if *metadataPort > 0 {
		options = append(options, dubbo.WithMetadataServicePort(*metadataPort))
	}
	switch mode {
	case "provider":
		options = append(options, dubbo.WithProtocol(
			protocol.WithTriple(),
			protocol.WithIp("127.0.0.1"),
			protocol.WithPort(*port),
		))
		var service []server.ServiceOption
		if *group != "" {
			service = append(service, server.WithGroup(*group))
		}
		if *version != "" {
			service = append(service, server.WithVersion(*version))
		}
		provide(options, service)
	case "consumer":
		os.Exit(consume(options, *calls, *providedBy, time.Duration(*waitSeconds)*time.Second, time.Duration(*intervalMs)*time.Millisecond))
	case "bench":
		os.Exit(bench(options, *expect, *providedBy, time.Duration(*waitSeconds)*time.Second))
	default:
		fail(2, "unknown mode "+mode)
	}
}

// registryOptions maps a Dubbo registry URL onto dubbo-go's registry options: application
// level registration unless registryType says interface or all.
func registryOptions(raw string, registryType string) []registry.Option {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		fail(2, "bad registry URL "+raw)
	}
	options := []registry.Option{registry.WithAddress(u.Host)}
	switch registryType {
	case "service":
		options = append(options, registry.WithRegisterService())
	case "interface":
		options = append(options, registry.WithRegisterInterface())
	case "all":
		options = append(options, registry.WithRegisterServiceAndInterface())
	default:
		fail(2, "unknown registry type "+registryType)
	}
	switch u.Scheme {
	case "etcd", "etcd3", "etcdv3":
		options = append(options, registry.WithEtcdV3())
	case "zookeeper":
		options = append(options, registry.WithZookeeper())
	case "nacos":
		options = append(options, registry.WithNacos())
		if ns := u.Query().Get("namespace"); ns != "" {
			options = append(options, registry.WithNamespace(ns))
		}
	default:
		fail(2, "unsupported registry "+u.Scheme)
	}
	return options
}

// Greeter answers naming this peer (dubbo-go wants the type exported).
type Greeter struct{}

func (Greeter) SayHello(_ context.Context, req *helloworld.HelloRequest) (*helloworld.HelloReply, error) {
	return &helloworld.HelloReply{Message: "Hello " + req.Name + " from dubbo-go"}, nil
}

func provide(options []dubbo.InstanceOption, service []server.ServiceOption) {
	instance, err := dubbo.NewInstance(options...)
	check(err, "instance")
	srv, err := instance.NewServer()
	check(err, "server")
	check(helloworld.RegisterGreeterHandler(srv, Greeter{}, service...), "register handler")
	// Serve blocks; readiness is the instance record in the registry, which the launcher
	// watches, and this line once serving has begun.
	go func() {
		if err := srv.Serve(); err != nil {
			fail(1, "serve: "+err.Error())
		}
	}()
	time.Sleep(200 * time.Millisecond)
	fmt.Println("READY")
	// Runs until the launcher closes standard input (or the process is killed).
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

func consume(options []dubbo.InstanceOption, calls int, providedBy string, wait, interval time.Duration) int {
	instance, err := dubbo.NewInstance(options...)
	check(err, "instance")
	cli, err := instance.NewClient(client.WithClientProtocolTriple(), client.WithClientRequestTimeout(3*time.Second), client.WithClientRetries(0))
	check(err, "client")
	var references []client.ReferenceOption
	if providedBy != "" {
		references = append(references, client.WithProvidedBy(providedBy))
	}
	svc, err := helloworld.NewGreeter(cli, references...)
	check(err, "greeter client")

	request := &helloworld.HelloRequest{Name: "dubbo-go"}
	started := time.Now()
	message := ""
	lastError := ""
	for message == "" && time.Since(started) < wait {
		reply, err := svc.SayHello(context.Background(), request)
		if err == nil {
			message = reply.Message
		} else {
			lastError = firstLine(err.Error())
			time.Sleep(200 * time.Millisecond)
		}
	}
	waited := time.Since(started).Milliseconds()
	ok, failed := 0, 0
	if message == "" {
		fmt.Fprintf(os.Stderr, "no answer within %s: %s\n", wait, lastError)
		failed = calls
	} else {
		for i := 0; i < calls; i++ {
			if i > 0 && interval > 0 {
				time.Sleep(interval)
			}
			reply, err := svc.SayHello(context.Background(), request)
			if err != nil {
				failed++
				fmt.Fprintln(os.Stderr, "call failed:", firstLine(err.Error()))
				continue
			}
			ok++
			message = reply.Message
		}
	}
	fmt.Printf("RESULT calls=%d ok=%d failed=%d waited_ms=%d message=%s\n", calls, ok, failed, waited, message)
	if failed == 0 && ok == calls {
		return 0
	}
	return 1
}

func firstLine(text string) string {
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		return text[:i]
	}
	return text
}

func check(err error, what string) {
	if err != nil {
		fail(1, what+": "+err.Error())
	}
}

func fail(code int, message string) {
	fmt.Fprintln(os.Stderr, message)
	os.Exit(code)
}

// addresses is the length of the last address list a directory gave its routers.
var addresses atomic.Int64

// countingRouter routes nothing away; it records how many addresses its directory holds,
// which the directory tells every router each time its list changes.
type countingRouter struct{ url *common.URL }

type countingRouterFactory struct{}

func (countingRouterFactory) NewPriorityRouter(url *common.URL) (router.PriorityRouter, error) {
	return &countingRouter{url: url}, nil
}

func (r *countingRouter) Route(invokers []base.Invoker, _ *common.URL, _ base.Invocation) []base.Invoker {
	return invokers
}

func (r *countingRouter) URL() *common.URL { return r.url }

func (r *countingRouter) Priority() int64 { return 0 }

func (r *countingRouter) Notify(invokers []base.Invoker) {
	addresses.Store(int64(len(invokers)))
}

// rssKB is the process's resident set (VmRSS of /proc/self/status) in KiB, 0 if unknown.
func rssKB() int64 {
	file, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer file.Close()
	scanner := bufio.NewScanner(file)
	for scanner.Scan() {
		if rest, ok := strings.CutPrefix(scanner.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}

// bench subscribes to the Greeter and waits until the directory holds expect addresses,
// making no call (see the package docs).
func bench(options []dubbo.InstanceOption, expect int, providedBy string, wait time.Duration) int {
	extension.SetRouterFactory("introspect-bench-count", func() router.PriorityRouterFactory {
		return countingRouterFactory{}
	})
	instance, err := dubbo.NewInstance(options...)
	check(err, "instance")
	cli, err := instance.NewClient(client.WithClientProtocolTriple(), client.WithClientRequestTimeout(3*time.Second), client.WithClientRetries(0))
	check(err, "client")
	var references []client.ReferenceOption
	if providedBy != "" {
		references = append(references, client.WithProvidedBy(providedBy))
	}
	startup := time.Since(processStarted).Milliseconds()
	before := rssKB()
	fmt.Printf("STARTED startup_ms=%d rss_kb=%d\n", startup, before)
	started := time.Now()
	_, err = helloworld.NewGreeter(cli, references...)
	check(err, "greeter client")
	for addresses.Load() < int64(expect) && time.Since(started) < wait {
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(started).Milliseconds()
	after := rssKB()
	seen := addresses.Load()
	fmt.Printf("BENCH addresses=%d elapsed_ms=%d rss_before_kb=%d rss_after_kb=%d startup_ms=%d\n", seen, elapsed, before, after, startup)
	if seen < int64(expect) {
		fmt.Fprintf(os.Stderr, "only %d of %d addresses within %s\n", seen, expect, wait)
		return 1
	}
	return 0
}
