package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/ferrofed/ferrofed/controllers"
	"github.com/ferrofed/ferrofed/gateway/config"
)

// operatorOptions are the flags of `ferrofed operator`.
type operatorOptions struct {
	metricsAddr   string
	metricsPlain  bool
	probeAddr     string
	pprofAddr     string
	leaderElect   bool
	enableWebhook bool
	webhookPort   int
	certDir       string
	maxConcurrent int
	allowedImages []string
	namespaces    []string
	tracing       operatorTracing
	poll          controllers.PollOptions
	zap           zap.Options
}

func newOperatorCommand() *cobra.Command {
	o := operatorOptions{zap: zap.Options{Development: false}}
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Run the Gateway operator (controller and validating webhook)",
		Long: `Run the Gateway operator: the GatewayReconciler and, unless --enable-webhook=false,
the validating admission webhook. The cluster is the one KUBECONFIG (or --kubeconfig)
names, else the in-cluster configuration.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return runOperator(o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", `address of the metrics endpoint; "0" turns it off`)
	f.BoolVar(&o.metricsPlain, "metrics-insecure", false, "serve the metrics over plain http without authentication (a loopback address only, e.g. for a benchmark)")
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	f.StringVar(&o.pprofAddr, "pprof-bind-address", "", `address of net/http/pprof's /debug/pprof/ (plain http, no authentication: a loopback address only); empty turns it off`)
	f.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader, so that only one replica reconciles")
	f.BoolVar(&o.enableWebhook, "enable-webhook", true, "serve the validating webhook (false: controller only, for local runs)")
	f.IntVar(&o.webhookPort, "webhook-port", 9443, "port of the webhook server")
	f.StringVar(&o.certDir, "webhook-cert-dir", "", "directory holding tls.crt and tls.key of the webhook server (default: controller-runtime's)")
	f.StringSliceVar(&o.allowedImages, "allowed-images", nil,
		`glob patterns a Gateway's spec.image must match, e.g. "registry.example.org/ferrofed/*" (* crosses '/'); empty allows every image`)
	f.StringSliceVar(&o.namespaces, "watch-namespaces", nil,
		"namespaces to watch and write in (a namespace-scoped install, with Roles); empty watches the whole cluster")
	f.IntVar(&o.maxConcurrent, "max-concurrent-reconciles", controllers.DefaultMaxConcurrentReconciles, "Gateways reconciled at once")
	f.DurationVar(&o.poll.Interval, "dependency-poll-interval", controllers.DefaultDependencyPollInterval,
		"how often each ready gateway pod's readiness and dependency report are read (at least 1s; 0 turns polling off)")
	f.IntVar(&o.poll.Concurrency, "dependency-poll-concurrency", controllers.DefaultDependencyPollConcurrency, "polls under way at once, over every Gateway")
	f.StringVar(&o.poll.Namespace, "operator-namespace", os.Getenv("POD_NAMESPACE"), "the operator's namespace, where its issuer key Secret is kept (default $POD_NAMESPACE)")
	f.StringVar(&o.poll.SecretName, "issuer-secret", controllers.DefaultIssuerSecret, "the Secret of the operator's issuer key, made once")
	f.StringVar(&o.tracing.endpoint, "tracing-endpoint", "", `OTLP/HTTP base URL the operator exports a span per reconcile to ({endpoint}/v1/traces); empty traces nothing`)
	f.Float64Var(&o.tracing.ratio, "tracing-sampling-ratio", 1, "share of reconciles traced, from 0 to 1 (parent-based)")
	f.DurationVar(&o.tracing.timeout, "tracing-timeout", config.DefaultTracingTimeoutMS*time.Millisecond, "bound of one export")
	f.StringVar(&o.tracing.headersFile, "tracing-headers-file", "", "file of `Name: value` lines sent with every export (read again at each export)")
	f.StringVar(&o.tracing.caFile, "tracing-ca-file", "", "PEM CA bundle an https --tracing-endpoint is verified with (default: the system's roots)")
	f.StringVar(&o.tracing.serviceName, "tracing-service-name", defaultOperatorServiceName, "service.name of the operator's spans")
	gfs := flag.NewFlagSet("operator", flag.ContinueOnError)
	o.zap.BindFlags(gfs)
	f.AddGoFlagSet(gfs)
	if kc := flag.CommandLine.Lookup("kubeconfig"); kc != nil {
		f.AddGoFlag(kc) // registered by controller-runtime; ctrl.GetConfig reads it
	}
	return cmd
}

// operatorGCPercent is the operator's GOGC unless the environment sets one: its heap is
// mostly its informer caches and the polls' last reports, long-lived, so the default
// 100 (a heap twice the live data before each collection) doubles its memory for
// little CPU saved. 25 keeps the heap near 1.25× the live data: with 1,000 Gateways of
// 3 polled replicas (test/operator/process) a live heap of about 25 MB collected every
// second or two, about 2 % of a core (docs/operator.md, "The operator's memory").
const operatorGCPercent = 25

func runOperator(o operatorOptions) error {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(operatorGCPercent)
	}
	if o.pprofAddr == "" && !strings.Contains(os.Getenv("GODEBUG"), "memprofilerate=") {
		// No heap profile can be asked for: the runtime stops sampling allocations,
		// whose records (a hash table and a bucket per allocating stack) grow to about
		// 1.8 MiB in a busy operator and are only ever read by pprof (docs/operator.md,
		// "The operator's memory").
		runtime.MemProfileRate = 0
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("find the cluster (KUBECONFIG or in-cluster): %w", err)
	}
	// The apiserver's answers uncompressed: every watch of a compressed stream keeps a
	// decompressor (its window and tables, tens of KiB) for the operator's whole life,
	// and the answers travel inside the cluster (docs/operator.md, "The operator's
	// memory").
	cfg.DisableCompression = true
	opts, err := controllers.ManagerOptions(controllers.ManagerConfig{
		MetricsBindAddress:     o.metricsAddr,
		MetricsInsecure:        o.metricsPlain,
		HealthProbeBindAddress: o.probeAddr,
		PprofBindAddress:       o.pprofAddr,
		LeaderElection:         o.leaderElect,
		Webhook:                o.enableWebhook,
		WebhookPort:            o.webhookPort,
		WebhookCertDir:         o.certDir,
		WatchNamespaces:        o.namespaces,
	})
	if err != nil {
		return err
	}
	tp, flushSpans, err := o.tracing.provider(ctrl.Log.WithName("tracing"))
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return fmt.Errorf("start manager: %w", err)
	}
	setup := controllers.Options{
		Webhook: o.enableWebhook, MaxConcurrentReconciles: o.maxConcurrent, AllowedImages: o.allowedImages, Poll: o.poll,
	}
	if tp != nil {
		setup.TracerProvider = tp
	}
	if _, err := controllers.Setup(mgr, setup); err != nil {
		return err
	}
	// The manager returns once every reconcile has ended: the spans are all queued, and
	// pushed within operatorTracingShutdownWait.
	defer flushSpans()
	return mgr.Start(ctrl.SetupSignalHandler())
}
