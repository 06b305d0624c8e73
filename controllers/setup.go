package controllers

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

// DefaultMaxConcurrentReconciles is how many Gateways are reconciled at once: each
// reconcile mostly waits on the apiserver, so a few in parallel keep a large
// fleet's first rollout short.
const DefaultMaxConcurrentReconciles = 8

// ManagerConfig is what shapes the operator's manager: the flags of `ferrofed
// operator`, and what the envtest suite sets instead (its own ports and webhook
// certificates). ManagerOptions turns it into the one ctrl.Options both use.
type ManagerConfig struct {
	// MetricsBindAddress is the metrics endpoint's address; "0" turns it off. It is
	// served over https, to callers the cluster authorizes for GET /metrics.
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz; "0" turns them off.
	HealthProbeBindAddress string
	// PprofBindAddress serves net/http/pprof (plain http, unauthenticated: meant for a
	// loopback address while profiling); empty or "0" turns it off.
	PprofBindAddress string
	// LeaderElection elects a leader, so that only one replica reconciles.
	LeaderElection bool
	// Webhook serves the validating webhook on WebhookHost:WebhookPort with the
	// certificates in WebhookCertDir (empty: controller-runtime's defaults).
	Webhook        bool
	WebhookHost    string
	WebhookPort    int
	WebhookCertDir string
	// WatchNamespaces, when not empty, are the only namespaces the operator watches
	// and writes in (a namespace-scoped install); empty watches the whole cluster.
	WatchNamespaces []string
}

// LeaderElectionID is the lease the operator's replicas elect a leader with.
const LeaderElectionID = "ferrofed-operator.ferrofed.io"

// NewScheme is the operator's scheme: the core Kubernetes types and ferrofed.io/v1alpha1.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := ferrofedv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return scheme, nil
}

// ManagerOptions are the operator manager's options: scheme, the trimmed cache
// (CacheOptions), metrics, probes, leader election and the webhook server. `ferrofed
// operator` and the envtest suite both build their manager from them, so that the
// suite's figures describe the binary users run.
func ManagerOptions(c ManagerConfig) (ctrl.Options, error) {
	scheme, err := NewScheme()
	if err != nil {
		return ctrl.Options{}, fmt.Errorf("build the scheme: %w", err)
	}
	if err := ferrofedv1alpha1.ValidateNamespaces(c.WatchNamespaces); err != nil {
		return ctrl.Options{}, err
	}
	cacheOpts := CacheOptions()
	if len(c.WatchNamespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range c.WatchNamespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	opts := ctrl.Options{
		Scheme: scheme,
		Cache:  cacheOpts,
		Client: client.Options{Cache: &client.CacheOptions{
			// ConfigMaps are read by name from the apiserver, never cached whole: a
			// cluster's ConfigMaps can hold far more than the operator's memory. Their
			// changes still arrive, through a metadata-only watch (SetupWithManager).
			// Secrets are never listed or watched (that would read them all): the one
			// the operator makes per Gateway is read by name.
			DisableFor: []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}},
		}},
		Metrics: metricsserver.Options{
			BindAddress:   c.MetricsBindAddress,
			SecureServing: true,
			// Only callers the cluster authorizes for GET /metrics may scrape.
			FilterProvider: filters.WithAuthenticationAndAuthorization,
		},
		HealthProbeBindAddress: c.HealthProbeBindAddress,
		PprofBindAddress:       c.PprofBindAddress,
		LeaderElection:         c.LeaderElection,
		LeaderElectionID:       LeaderElectionID,
	}
	if c.Webhook {
		opts.WebhookServer = webhook.NewServer(webhook.Options{Host: c.WebhookHost, Port: c.WebhookPort, CertDir: c.WebhookCertDir})
	}
	return opts, nil
}

// Options tune Setup.
type Options struct {
	// Webhook registers the validating webhook on the manager's webhook server.
	Webhook bool
	// MaxConcurrentReconciles defaults to DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// AllowedImages, when not empty, are the glob patterns a Gateway's spec.image must
	// match (ferrofedv1alpha1.ImageAllowed), in the webhook and in the controller.
	AllowedImages []string
	// WrapClient and WrapRecorder, when set, wrap the reconciler's client and event
	// recorder (the suite counts writes with them); nil leaves the manager's.
	WrapClient   func(client.Client) client.Client
	WrapRecorder func(events.EventRecorder) events.EventRecorder
}

// Setup registers the GatewayReconciler with mgr, the Gateway validating webhook on
// mgr's webhook server when asked, and the /healthz and /readyz checks (ready once the
// webhook server serves, when there is one). It returns the reconciler.
func Setup(mgr ctrl.Manager, o Options) (*GatewayReconciler, error) {
	if err := ferrofedv1alpha1.ValidateImagePatterns(o.AllowedImages); err != nil {
		return nil, err
	}
	r := &GatewayReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder(FieldOwner), AllowedImages: o.AllowedImages}
	if o.WrapClient != nil {
		r.Client = o.WrapClient(r.Client)
	}
	if o.WrapRecorder != nil {
		r.Recorder = o.WrapRecorder(r.Recorder)
	}
	registerDrainMetrics()
	if err := r.SetupWithManager(mgr, o.MaxConcurrentReconciles); err != nil {
		return nil, fmt.Errorf("set up the Gateway controller: %w", err)
	}
	// The StoredQuery resources, rendered into each Gateway's stored-query ConfigMap.
	if err := (&StoredQueryReconciler{Client: r.Client, APIReader: mgr.GetAPIReader()}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up the StoredQuery controller: %w", err)
	}
	ready := healthz.Ping
	if o.Webhook {
		if err := ferrofedv1alpha1.SetupWebhookWithManager(mgr, ferrofedv1alpha1.GatewayValidator{AllowedImages: o.AllowedImages}); err != nil {
			return nil, fmt.Errorf("set up the Gateway webhook: %w", err)
		}
		ready = mgr.GetWebhookServer().StartedChecker()
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add the healthz check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", ready); err != nil {
		return nil, fmt.Errorf("add the readyz check: %w", err)
	}
	return r, nil
}

// The metrics endpoint of `ferrofed operator` authenticates and authorizes its callers.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// CacheOptions keep the informers small in a big cluster:
//   - the owned kinds (Deployments, Services, PodDisruptionBudgets) are listed and
//     watched only with the operator's managed-by label, so unrelated objects of the
//     cluster never reach the operator's memory;
//   - of every object's managedFields only FieldOwner's entries stay (the reconciler
//     extracts those and nothing else), and a Gateway loses kubectl's
//     last-applied-configuration, a second copy of its spec that the reconciler never
//     reads. The trimmed copies must never be sent back whole (an Update would reset
//     the other managers' fields): the reconciler only applies, patches status and
//     deletes.
//
// ConfigMaps have no full informer at all (see ManagerOptions' client options).
func CacheOptions() cache.Options {
	owned := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{LabelManagedBy: FieldOwner})}
	return cache.Options{
		DefaultTransform: trimForCache,
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}:            owned,
			&corev1.Service{}:               owned,
			&policyv1.PodDisruptionBudget{}: owned,
			&corev1.Pod{}:                   owned, // the gateway pods carry the label too
		},
	}
}

func trimForCache(in any) (any, error) {
	obj, ok := in.(metav1.Object)
	if !ok {
		return in, nil // e.g. cache.DeletedFinalStateUnknown
	}
	if mf := obj.GetManagedFields(); len(mf) > 0 {
		kept := mf[:0:0]
		for _, e := range mf {
			if e.Manager == FieldOwner {
				kept = append(kept, e)
			}
		}
		obj.SetManagedFields(kept)
	}
	if _, isGateway := in.(*ferrofedv1alpha1.Gateway); isGateway {
		if a := obj.GetAnnotations(); a != nil {
			if _, has := a[corev1.LastAppliedConfigAnnotation]; has {
				trimmed := make(map[string]string, len(a)-1)
				for k, v := range a {
					if k != corev1.LastAppliedConfigAnnotation {
						trimmed[k] = v
					}
				}
				obj.SetAnnotations(trimmed)
			}
		}
	}
	return in, nil
}
