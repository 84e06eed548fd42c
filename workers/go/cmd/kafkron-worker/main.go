// Command kafkron-worker runs kafkron jobs from {ns}.runs and writes their results
// (docs/WORKER-PROTOCOL.md). Jobs: "shell" and "http" (and "kafkron.http", the
// carrier of HTTP targets) built in, the conformance vocabulary with --test-jobs.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kafkron/kafkron/workers/go/kafkron"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	hostname, _ := os.Hostname()
	concurrency := flag.Int("concurrency", 8, "jobs at once")
	session := flag.Int("session-timeout-ms", 10_000, "group session timeout (ms)")
	drain := flag.Float64("drain-s", 30, "on SIGTERM, seconds running jobs may take to finish")
	leaseBeats := flag.Int("lease-loss-heartbeats", 3, "cancel all jobs after N heartbeat intervals without the group coordinator (0: never)")
	workerID := flag.String("worker-id", fmt.Sprintf("%s:%d", hostname, os.Getpid()), "name in results")
	var httpAllow []string
	flag.Func("http-allow", "an address, CIDR or host name HTTP jobs may reach although not public (repeatable)",
		func(v string) error { httpAllow = append(httpAllow, v); return nil })
	testJobs := flag.Bool("test-jobs", false, "register the conformance suite's test.* jobs")
	flag.Parse()

	var clientOpts []kgo.Opt
	namespace := envOr("KAFKRON_NAMESPACE", "kafkron")
	bootstrap := strings.Split(envOr("KAFKRON_BOOTSTRAP", "127.0.0.1:9092"), ",")
	if mode := os.Getenv("KAFKRON_TRANSACTIONAL_IDS"); mode != "" && mode != "tenant" {
		fmt.Fprintf(os.Stderr, "kafkron-worker: KAFKRON_TRANSACTIONAL_IDS=%s is not supported (only tenant)\n", mode)
		os.Exit(2)
	}
	security, err := kafkron.LoadSecurity(os.Getenv)
	if err == nil {
		clientOpts, err = security.Opts()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafkron-worker:", err)
		os.Exit(2)
	}
	registry := kafkron.NewRegistry()
	kafkron.RegisterShell(registry)
	egress, err := kafkron.ParseEgressRule(httpAllow)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafkron-worker:", err)
		os.Exit(2)
	}
	kafkron.RegisterHTTPWith(registry, egress)
	if *testJobs {
		kafkron.RegisterTestJobs(registry)
	}
	opts := kafkron.Options{
		Namespace: namespace, Bootstrap: bootstrap, WorkerID: *workerID, Concurrency: *concurrency,
		SessionTimeout: time.Duration(*session) * time.Millisecond,
		Drain:          time.Duration(*drain * float64(time.Second)), LeaseLossBeats: *leaseBeats,
		Registry: registry, Logger: log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds),
		ClientOpts: clientOpts,
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "kafkron-worker:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := kafkron.NewWorker(opts).Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "kafkron-worker:", err)
		os.Exit(1)
	}
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
