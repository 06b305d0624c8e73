package controllers

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
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
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
	"github.com/ferrofed/ferrofed/internal/webhook"
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
	// served over https, to callers the cluster authorizes for GET /metrics, unless
	// MetricsInsecure.
	MetricsBindAddress string
	// MetricsInsecure serves the metrics over plain http to anyone: meant for a
	// loopback address (the benchmark reads the webhook's own latency from it).
	MetricsInsecure bool
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
	if err := gatewayspec.ValidateNamespaces(c.WatchNamespaces); err != nil {
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
			TLSOpts:       []func(*tls.Config){http1Only},
			// Only callers the cluster authorizes for GET /metrics may scrape.
			FilterProvider: filters.WithAuthenticationAndAuthorization,
		},
		HealthProbeBindAddress: c.HealthProbeBindAddress,
		PprofBindAddress:       c.PprofBindAddress,
		LeaderElection:         c.LeaderElection,
		LeaderElectionID:       LeaderElectionID,
	}
	if c.MetricsInsecure {
		opts.Metrics.SecureServing, opts.Metrics.FilterProvider = false, nil
	}
	if c.Webhook {
		opts.WebhookServer = ctrlwebhook.NewServer(ctrlwebhook.Options{Host: c.WebhookHost, Port: c.WebhookPort, CertDir: c.WebhookCertDir,
			TLSOpts: []func(*tls.Config){http1Only}})
	}
	return opts, nil
}

// http1Only makes a TLS server offer HTTP/1.1 alone. HTTP/2's stream resets let one
// client make a server start and abandon handlers without bound (CVE-2023-44487,
// CVE-2023-39325), and the API server's calls to a webhook need none of what it adds:
// over HTTP/1.1 each call is read, handled and answered on its connection's own
// goroutine, with no framer, stream scheduler or write loop between them.
func http1Only(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }

// Options tune Setup.
type Options struct {
	// Webhook registers the validating webhook on the manager's webhook server.
	Webhook bool
	// MaxConcurrentReconciles defaults to DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// AllowedImages, when not empty, are the glob patterns a Gateway's spec.image must
	// match (gatewayspec.ImageAllowed), in the webhook and in the controller.
	AllowedImages []string
	// WrapClient and WrapRecorder, when set, wrap the reconciler's client and event
	// recorder (the suite counts writes with them); nil leaves the manager's.
	WrapClient   func(client.Client) client.Client
	WrapRecorder func(events.EventRecorder) events.EventRecorder
	// TracerProvider, when set, makes a span of every reconcile of a Gateway
	// (SpanReconcileGateway); nil traces nothing.
	TracerProvider trace.TracerProvider
	// Poll, when its Interval is not 0, has the operator read its pods' dependency
	// reports (docs/operator.md, "The operator reads its pods").
	Poll PollOptions
}

// PollOptions are the flags of the dependency polls.
type PollOptions struct {
	// Interval is how often each ready pod is read; 0 turns polling off.
	Interval time.Duration
	// Concurrency bounds the polls under way at once; 0 is DefaultDependencyPollConcurrency.
	Concurrency int
	// Namespace and SecretName are where the operator's issuer key is kept.
	Namespace, SecretName string
	// HTTP, when set, is the client the polls use (tests).
	HTTP *http.Client
}

// Setup registers the GatewayReconciler with mgr, the Gateway validating webhook on
// mgr's webhook server when asked, and the /healthz and /readyz checks (ready once the
// webhook server serves, when there is one). It returns the reconciler.
func Setup(mgr ctrl.Manager, o Options) (*GatewayReconciler, error) {
	if err := gatewayspec.ValidateImagePatterns(o.AllowedImages); err != nil {
		return nil, err
	}
	r := &GatewayReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder(FieldOwner), AllowedImages: o.AllowedImages, TracerProvider: o.TracerProvider}
	// The pods, Deployments, Services and PodDisruptionBudgets are read from their
	// informers' stores, which hold them compact (podcache.go, ownedcache.go).
	stores, err := storesOf(context.Background(), mgr.GetCache())
	if err != nil {
		return nil, err
	}
	if r.Pods, err = storeOf(context.Background(), mgr.GetCache(), &corev1.Pod{}); err != nil {
		return nil, err
	}
	r.Client = cachedReads{Client: r.Client, compactStores: stores}
	if o.WrapClient != nil {
		r.Client = o.WrapClient(r.Client)
	}
	if o.WrapRecorder != nil {
		r.Recorder = o.WrapRecorder(r.Recorder)
	}
	registerMetrics()
	if err := o.Poll.validate(); err != nil {
		return nil, err
	}
	if o.Poll.Interval > 0 && o.Poll.Namespace == "" {
		// A local run (out of the cluster, without POD_NAMESPACE) keeps working as before.
		mgr.GetLogger().Info("Dependency polling is off: no --operator-namespace (nor POD_NAMESPACE) to keep the issuer key in")
	} else if o.Poll.Interval > 0 {
		p, err := newPoller(mgr, o.Poll)
		if err != nil {
			return nil, err
		}
		r.Poller = p
	}
	if err := r.SetupWithManager(mgr, o.MaxConcurrentReconciles); err != nil {
		return nil, fmt.Errorf("set up the Gateway controller: %w", err)
	}
	// The StoredQuery resources, rendered into each Gateway's stored-query ConfigMap.
	if err := (&StoredQueryReconciler{Client: r.Client, Metadata: mgr.GetCache()}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up the StoredQuery controller: %w", err)
	}
	ready := healthz.Ping
	if o.Webhook {
		// A referenced ConfigMap is read by name from the apiserver (get on configmaps,
		// which the controller has already), for the warnings of its content.
		hook := webhook.GatewayValidator{AllowedImages: o.AllowedImages, ConfigMaps: mgr.GetAPIReader()}
		mgr.GetWebhookServer().Register(webhook.WebhookPath, timedWebhook(hook))
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

// MaxDependencyPollConcurrency bounds --dependency-poll-concurrency.
const MaxDependencyPollConcurrency = 1024

// validate refuses flags out of their range, naming the flag; 0 is each one's "off" or
// "default".
func (o PollOptions) validate() error {
	switch {
	case o.Interval < 0 || (o.Interval > 0 && o.Interval < time.Second):
		return fmt.Errorf("--dependency-poll-interval %s: at least 1s, or 0 to turn polling off", o.Interval)
	case o.Concurrency < 0 || o.Concurrency > MaxDependencyPollConcurrency:
		return fmt.Errorf("--dependency-poll-concurrency %d: from 1 to %d (0: the default, %d)", o.Concurrency, MaxDependencyPollConcurrency, DefaultDependencyPollConcurrency)
	}
	return nil
}

// newPoller loads (or makes) the operator's issuer key and adds the poller to mgr.
func newPoller(mgr ctrl.Manager, o PollOptions) (*DependencyPoller, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Secrets are read around the cache (ManagerOptions), so this works before the
	// manager starts.
	is, err := LoadIssuer(ctx, mgr.GetClient(), o.Namespace, cmp.Or(o.SecretName, DefaultIssuerSecret))
	if err != nil {
		return nil, err
	}
	gateways, err := storeOf(ctx, mgr.GetCache(), &ferrofedv1alpha1.Gateway{})
	if err != nil {
		return nil, err
	}
	pods, err := storeOf(ctx, mgr.GetCache(), &corev1.Pod{})
	if err != nil {
		return nil, err
	}
	p := &DependencyPoller{Gateways: gateways, Pods: pods, Issuer: is, Interval: o.Interval,
		Concurrency: cmp.Or(o.Concurrency, DefaultDependencyPollConcurrency), HTTP: o.HTTP, Events: make(chan event.GenericEvent, 1024)}
	if err := mgr.Add(p); err != nil {
		return nil, fmt.Errorf("add the dependency poller: %w", err)
	}
	registerPollMetrics(p)
	return p, nil
}

// The metrics endpoint of `ferrofed operator` authenticates and authorizes its callers.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// CacheOptions keep the informers small in a big cluster:
//   - the owned kinds (Deployments, Services, PodDisruptionBudgets,
//     HorizontalPodAutoscalers) and the gateway
//     pods are listed and watched only with the operator's managed-by label, so
//     unrelated objects of the cluster never reach the operator's memory;
//   - what is cached of each object is what the reconciler reads, nothing more
//     (trimForCache): an owned object keeps its name, owner, generation, its status
//     counters and managedSum, the digest of its applied-config annotation and of
//     the fields FieldOwner's apply holds (what the reconciler compares with the
//     desired apply configuration, see managed.go), not its spec, labels, annotations
//     or managedFields (a Deployment keeps spec.replicas, and whether a manager other
//     than FieldOwner's apply holds it: replicasSeed); an owned Deployment, Service
//     or PodDisruptionBudget is kept as a cachedOwned (ownedcache.go) and a pod as a
//     cachedPod (podcache.go: its metadata, IP, readiness, grace period and ended
//     containers), which the reconciler reads from the informers' stores; a Gateway
//     loses its managedFields and kubectl's last-applied-configuration; a spool claim
//     keeps only its AnnotationReleaseQuarantine of its annotations; a ConfigMap's
//     metadata (the only part watched) loses its annotations and managedFields. The
//     trimmed copies must never be sent back whole (an Update would reset the other
//     managers' fields): the reconciler only applies, patches status and deletes.
//
// ConfigMaps have no full informer at all (see ManagerOptions' client options).
func CacheOptions() cache.Options {
	owned := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{LabelManagedBy: FieldOwner})}
	return cache.Options{
		DefaultTransform: trimForCache,
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}:                     owned,
			&appsv1.StatefulSet{}:                    owned,
			&corev1.Service{}:                        owned,
			&policyv1.PodDisruptionBudget{}:          owned,
			&autoscalingv2.HorizontalPodAutoscaler{}: owned,
			&corev1.Pod{}:                            owned, // the gateway pods and the hand-over Jobs' carry the label too
			// The hand-over Jobs, and the spool claims (labelled through the
			// StatefulSet's volumeClaimTemplate).
			&batchv1.Job{}:                  owned,
			&corev1.PersistentVolumeClaim{}: owned,
		},
	}
}

// cacheMark starts the generateName of a cached owned object, which trimForCache
// replaces by cacheMark + managedSum of the live object (+ replicasHeldMark for a
// Deployment whose spec.replicas another manager holds). A generateName is kept, not
// an annotation: one string instead of a map for every owned object in the cache
// (3,000 for 1,000 Gateways). No object the apiserver serves can carry it (a
// generateName with ":" is refused), and the operator's own objects never have a
// generateName: only the cache's trimmed copies do.
const (
	cacheMark        = "ferrofed.io:cache:"
	replicasHeldMark = ":replicas-held"
)

// IsTrimmedForCache reports whether obj is a cached owned object that trimForCache cut
// to its metadata, status and cacheMark.
func IsTrimmedForCache(obj client.Object) bool {
	return strings.HasPrefix(obj.GetGenerateName(), cacheMark)
}

// cachedSum is the managedSum a trimmed owned object was cached with.
func cachedSum(obj client.Object) (string, bool) {
	if !IsTrimmedForCache(obj) {
		return "", false
	}
	return strings.TrimSuffix(strings.TrimPrefix(obj.GetGenerateName(), cacheMark), replicasHeldMark), true
}

func trimForCache(in any) (any, error) {
	switch o := in.(type) {
	case *appsv1.Deployment:
		held := replicasHeldBy(o.ManagedFields)
		if trimOwned(o) {
			// Read: the generations, the replica counts, and spec.replicas with who
			// holds it (an autoscaled Gateway's, replicasSeed).
			if held {
				o.GenerateName += replicasHeldMark
			}
			in = compactOwned(o) // spec.replicas and the status counters kept (cachedOwned)
		}
	case *appsv1.StatefulSet:
		if trimOwned(o) {
			o.Spec = appsv1.StatefulSetSpec{}
			o.Status.Conditions = nil // read: the generations and replica counts
		}
	case *batchv1.Job:
		// Read: labels, owner, conditions (the hand-over's state).
		o.ManagedFields, o.Annotations = nil, nil
		o.Spec = batchv1.JobSpec{}
	case *corev1.PersistentVolumeClaim:
		// Read: name, labels, owner, deletion, and the one annotation a person sets
		// to release a claim's quarantine.
		o.ManagedFields = nil
		if v, ok := o.Annotations[AnnotationReleaseQuarantine]; ok {
			o.Annotations = map[string]string{AnnotationReleaseQuarantine: v}
		} else {
			o.Annotations = nil
		}
		o.Spec, o.Status = corev1.PersistentVolumeClaimSpec{}, corev1.PersistentVolumeClaimStatus{}
	case *corev1.Service:
		if trimOwned(o) {
			in = compactOwned(o)
		}
	case *policyv1.PodDisruptionBudget:
		if trimOwned(o) {
			in = compactOwned(o)
		}
	case *cachedOwned:
		return in, nil // compact already
	case *autoscalingv2.HorizontalPodAutoscaler:
		if trimOwned(o) {
			o.Spec, o.Status = autoscalingv2.HorizontalPodAutoscalerSpec{}, autoscalingv2.HorizontalPodAutoscalerStatus{}
		}
	case *corev1.Pod:
		in = compactPod(o)
	case *cachedPod:
		return in, nil // compact already
	case *ferrofedv1alpha1.Gateway:
		o.ManagedFields = nil
		internGatewayStatus(o)
		if _, has := o.Annotations[corev1.LastAppliedConfigAnnotation]; has {
			trimmed := make(map[string]string, len(o.Annotations)-1)
			for k, v := range o.Annotations {
				if k != corev1.LastAppliedConfigAnnotation {
					trimmed[k] = v
				}
			}
			o.Annotations = trimmed
		}
	case *metav1.PartialObjectMetadata:
		// A metadata-only watch (ConfigMaps) only maps events to Gateways, by name and
		// controller.
		o.ManagedFields, o.Annotations = nil, nil
	case metav1.Object:
		o.SetManagedFields(nil)
	}
	if o, ok := in.(metav1.Object); ok {
		internMeta(o)
	}
	return in, nil // e.g. cache.DeletedFinalStateUnknown unchanged
}

// trimOwned replaces an owned object's managedFields, labels and annotations by
// cacheMark and managedSum, the digest of what FieldOwner applied to it, in its
// generateName (the reconciler reads an owned object's name, ownerReferences,
// generation and status, and that digest). It reports whether the caller may now drop
// its spec.
func trimOwned(o client.Object) bool {
	if IsTrimmedForCache(o) {
		return false // trimmed already
	}
	o.SetGenerateName(cacheMark + managedSum(o))
	o.SetAnnotations(nil)
	o.SetLabels(nil)
	o.SetManagedFields(nil)
	return true
}

// timedWebhook is h, each review it answers observed in webhookSeconds.
func timedWebhook(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, r)
		webhookSeconds.Observe(time.Since(start).Seconds())
	})
}
