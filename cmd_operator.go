package main

import (
	"flag"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/controllers"
)

func init() { extraCommands = append(extraCommands, newOperatorCommand) }

// operatorOptions are the flags of `ferrofed operator`.
type operatorOptions struct {
	metricsAddr   string
	probeAddr     string
	leaderElect   bool
	enableWebhook bool
	webhookPort   int
	certDir       string
	maxConcurrent int
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
		RunE: func(cmd *cobra.Command, _ []string) error { return runOperator(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", `address of the metrics endpoint; "0" turns it off`)
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	f.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader, so that only one replica reconciles")
	f.BoolVar(&o.enableWebhook, "enable-webhook", true, "serve the validating webhook (false: controller only, for local runs)")
	f.IntVar(&o.webhookPort, "webhook-port", 9443, "port of the webhook server")
	f.StringVar(&o.certDir, "webhook-cert-dir", "", "directory holding tls.crt and tls.key of the webhook server (default: controller-runtime's)")
	f.IntVar(&o.maxConcurrent, "max-concurrent-reconciles", controllers.DefaultMaxConcurrentReconciles, "Gateways reconciled at once")
	gfs := flag.NewFlagSet("operator", flag.ContinueOnError)
	o.zap.BindFlags(gfs)
	f.AddGoFlagSet(gfs)
	if kc := flag.CommandLine.Lookup("kubeconfig"); kc != nil {
		f.AddGoFlag(kc) // registered by controller-runtime; ctrl.GetConfig reads it
	}
	return cmd
}

func runOperator(cmd *cobra.Command, o operatorOptions) error {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := ferrofedv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("find the cluster (KUBECONFIG or in-cluster): %w", err)
	}
	opts := ctrl.Options{
		Scheme: scheme,
		Metrics: metricsserver.Options{
			BindAddress:   o.metricsAddr,
			SecureServing: true,
			// Only callers the cluster authorizes for GET /metrics may scrape.
			FilterProvider: filters.WithAuthenticationAndAuthorization,
		},
		HealthProbeBindAddress: o.probeAddr,
		LeaderElection:         o.leaderElect,
		LeaderElectionID:       "ferrofed-operator.ferrofed.io",
	}
	if o.enableWebhook {
		opts.WebhookServer = webhook.NewServer(webhook.Options{Port: o.webhookPort, CertDir: o.certDir})
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return fmt.Errorf("start manager: %w", err)
	}
	if err := controllers.Setup(mgr, controllers.Options{Webhook: o.enableWebhook, MaxConcurrentReconciles: o.maxConcurrent}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	ready := healthz.Ping
	if o.enableWebhook {
		ready = mgr.GetWebhookServer().StartedChecker()
	}
	if err := mgr.AddReadyzCheck("readyz", ready); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
