// Package operator_test runs the operator against a real kube-apiserver and etcd
// (envtest, with KUBEBUILDER_ASSETS from hack/controlplane.sh): the admission table
// through the CRD's CEL rules, the webhook, gateway/lifecycle and config check; the
// reconciler with the manager running; its write count; and the 1,000-Gateway benchmark.
package operator_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/controllers"
	"github.com/ferrofed/ferrofed/internal/webhook"
	"github.com/ferrofed/ferrofed/test/certpool"
	"github.com/ferrofed/ferrofed/test/controlplane"
)

// celOnlyLabel marks namespaces the webhook does not cover, so that an object there
// meets the CRD's own rules alone, as it does when no operator runs.
const celOnlyLabel = "ferrofed.io/test-cel-only"

var (
	scheme     = runtime.NewScheme()
	env        *envtest.Environment
	restConfig *rest.Config
	// k8s is an uncached client for the tests' own reads and writes.
	k8s client.Client
	// reconciler is the manager's GatewayReconciler; its client and recorder count writes.
	reconciler *controllers.GatewayReconciler
	// managerCache is the manager's informer cache, built from controllers.ManagerOptions.
	managerCache cache.Cache
	writes       atomic.Int64
	eventsSent   atomic.Int64
	// webhookURL and webhookClient reach the manager's webhook server directly.
	webhookURL    string
	webhookClient *http.Client
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// noControlPlane, when set, says why every test of the package skips: the control
// plane is missing and CI is not set (under CI=true the package fails instead).
var noControlPlane string

// needControlPlane starts every test and benchmark of the package.
func needControlPlane(t testing.TB) {
	t.Helper()
	if noControlPlane != "" {
		t.Skip(noControlPlane)
	}
}

func run(m *testing.M) int {
	if why := controlplane.Missing(false); why != "" {
		if controlplane.CI() {
			fmt.Fprintln(os.Stderr, "operator tests: "+why+"; CI=true, so the package fails instead of skipping")
			return 1
		}
		noControlPlane = why
		return m.Run()
	}
	os.Setenv("KUBEBUILDER_ASSETS", controlplane.Assets())
	log.SetLogger(ctrlLogger())
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, ferrofedv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	hook, err := webhookConfiguration()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{hook}},
	}
	// envtest's default service range, a /24, runs out of ClusterIPs before the
	// benchmark's 1,000 Services.
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/16")
	restConfig, err = env.Start()
	if err != nil {
		_ = env.Stop() // a failed CRD install leaves etcd and the apiserver running
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	// As ctrl.GetConfig does for `ferrofed operator`: no client-side rate limit, the
	// apiserver's priority and fairness governs.
	restConfig.QPS = -1

	operatorConfig, err := chartRBAC(restConfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	defer func() { cancel(); <-stopped }() // the manager stops before envtest removes its certificates
	if err := startManager(ctx, operatorConfig, &env.WebhookInstallOptions, stopped); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if k8s, err = client.New(restConfig, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "cel-only", Labels: map[string]string{celOnlyLabel: "true"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "webhook"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "reconcile", Labels: map[string]string{celOnlyLabel: "true"}}},
	} {
		if err := k8s.Create(ctx, ns); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// webhookConfiguration is config/webhook/manifests.yaml, as the chart installs it, with
// a namespace selector that leaves out the namespaces labelled celOnlyLabel.
func webhookConfiguration() (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "webhook", "manifests.yaml"))
	if err != nil {
		return nil, err
	}
	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := yaml.Unmarshal(data, hook); err != nil {
		return nil, fmt.Errorf("read webhook manifest: %w", err)
	}
	for i := range hook.Webhooks {
		hook.Webhooks[i].NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: celOnlyLabel, Operator: metav1.LabelSelectorOpDoesNotExist},
		}}
	}
	return hook, nil
}

// operatorUser is the chart's ServiceAccount, as the apiserver names it: the manager
// runs as this user, with exactly the operator's generated ClusterRole.
const operatorUser = "system:serviceaccount:ferrofed-system:ferrofed-operator"

// chartRBAC installs config/rbac/role.yaml (the ClusterRole the chart installs) bound to
// operatorUser, and returns a configuration that impersonates it: a permission the
// operator lacks fails the suite as it would fail in a cluster.
func chartRBAC(admin *rest.Config) (*rest.Config, error) {
	c, err := client.New(admin, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	if err != nil {
		return nil, err
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		return nil, fmt.Errorf("read config/rbac/role.yaml: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "ferrofed-system", Name: "ferrofed-operator"}},
	}
	// The operator's namespace, where it keeps its issuer key (dependencies_test.go).
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}
	for _, o := range []client.Object{ns, role, binding} {
		if err := c.Create(context.Background(), o); err != nil {
			return nil, fmt.Errorf("install the operator's RBAC: %w", err)
		}
	}
	op := rest.CopyConfig(admin)
	op.Impersonate = rest.ImpersonationConfig{UserName: operatorUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ferrofed-system", "system:authenticated"}}
	return op, nil
}

// operatorNamespace is the operator's namespace; pollInterval its
// --dependency-poll-interval.
const (
	operatorNamespace = "ferrofed-system"
	pollInterval      = 2 * time.Second
)

// allowedImages is the suite's --allowed-images: every test image matches it.
var allowedImages = []string{"ghcr.io/ferrofed/*"}

func startManager(ctx context.Context, operatorConfig *rest.Config, wh *envtest.WebhookInstallOptions, stopped chan<- struct{}) error {
	// The manager `ferrofed operator` builds, with the suite's ports and certificates.
	opts, err := controllers.ManagerOptions(controllers.ManagerConfig{
		MetricsBindAddress:     "0",
		HealthProbeBindAddress: "0",
		Webhook:                true,
		WebhookHost:            wh.LocalServingHost,
		WebhookPort:            wh.LocalServingPort,
		WebhookCertDir:         wh.LocalServingCertDir,
	})
	if err != nil {
		close(stopped)
		return err
	}
	mgr, err := ctrl.NewManager(operatorConfig, opts)
	if err != nil {
		close(stopped)
		return fmt.Errorf("new manager: %w", err)
	}
	managerCache = mgr.GetCache()
	reconciler, err = controllers.Setup(mgr, controllers.Options{
		Webhook:       true,
		AllowedImages: allowedImages,
		WrapClient:    func(c client.Client) client.Client { return &countingClient{Client: c} },
		WrapRecorder:  func(r events.EventRecorder) events.EventRecorder { return countingRecorder{r} },
		// The reconciles of the Gateways tracedGateways names are kept (tracing_test.go).
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(reconcileSpans)),
		// The pods' reports are read every pollInterval (dependencies_test.go).
		Poll: controllers.PollOptions{Interval: pollInterval, Namespace: operatorNamespace},
	})
	if err != nil {
		close(stopped)
		return err
	}
	go func() {
		defer close(stopped)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()

	pool, err := certpool.FromPEM(wh.LocalServingCAData)
	if err != nil {
		return err
	}
	webhookClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	addr := net.JoinHostPort(wh.LocalServingHost, strconv.Itoa(wh.LocalServingPort))
	webhookURL = "https://" + addr + webhook.WebhookPath
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool})
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("webhook server did not start: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("cache did not sync")
	}
	return nil
}

// countingClient counts every write the reconciler makes.
type countingClient struct{ client.Client }

func (c *countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	writes.Add(1)
	return c.Client.Create(ctx, obj, opts...)
}

func (c *countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	writes.Add(1)
	return c.Client.Update(ctx, obj, opts...)
}

func (c *countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	writes.Add(1)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *countingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	writes.Add(1)
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	writes.Add(1)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *countingClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	writes.Add(1)
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

func (c *countingClient) Status() client.SubResourceWriter {
	return countingStatus{c.Client.Status()}
}

func (c *countingClient) SubResource(name string) client.SubResourceClient {
	return countingSubResource{c.Client.SubResource(name)}
}

type countingStatus struct{ client.SubResourceWriter }

func (s countingStatus) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	writes.Add(1)
	return s.SubResourceWriter.Create(ctx, obj, sub, opts...)
}

func (s countingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	writes.Add(1)
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func (s countingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	writes.Add(1)
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (s countingStatus) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	writes.Add(1)
	return s.SubResourceWriter.Apply(ctx, obj, opts...)
}

type countingSubResource struct{ client.SubResourceClient }

func (s countingSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	writes.Add(1)
	return s.SubResourceClient.Create(ctx, obj, sub, opts...)
}

func (s countingSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	writes.Add(1)
	return s.SubResourceClient.Update(ctx, obj, opts...)
}

func (s countingSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	writes.Add(1)
	return s.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

func (s countingSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	writes.Add(1)
	return s.SubResourceClient.Apply(ctx, obj, opts...)
}

// countingRecorder counts the events the reconciler emits: each is a write too.
type countingRecorder struct{ events.EventRecorder }

func (r countingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	eventsSent.Add(1)
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}
