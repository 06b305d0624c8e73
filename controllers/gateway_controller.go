package controllers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	autoscalingv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

// configMapRefIndex indexes Gateways by the ConfigMap their spec.config.configMapRef names.
const configMapRefIndex = "spec.config.configMapRef.name"

// GatewayReconciler makes the ConfigMap, Deployment, Service, PodDisruptionBudget and
// HorizontalPodAutoscaler of each Gateway match its spec, and reports what it did in
// the Gateway's status.
//
// An unchanged Gateway costs no write: before applying an object, the reconciler
// extracts from the live object (the cache) the fields FieldOwner manages, with their
// live values, and skips the apply when they equal the desired apply configuration.
// Someone else changing one of those fields takes it over, which makes the extracted
// configuration differ, so drift is still repaired (with ForceOwnership).
type GatewayReconciler struct {
	client.Client
	// APIReader reads around the cache: the cache holds only the objects labelled as
	// the operator's, and an object of an owned name without the label must still be
	// seen (never adopted). Nil reads through Client only.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// AllowedImages, when not empty, are the glob patterns spec.image must match
	// (see gatewayspec.ImageAllowed); a Gateway whose image matches none is not rolled out.
	AllowedImages []string
	// PodReader reads retiring pods' metrics; nil uses NewPodReader().
	PodReader *http.Client
	// TracerProvider, when set, gets a span per reconcile (controllers/tracing.go).
	TracerProvider trace.TracerProvider
	// Pods is the store of the cache's pod informer (storeOf), where the gateway and
	// hand-over pods are read: the cache keeps them as cachedPods, which the client
	// cannot list (podcache.go).
	Pods toolscache.Store
	// Poller, when set, reads the pods' dependency reports: its issuer is rendered into
	// every Gateway, and the status carries what it read (dependencypoll.go).
	Poller *DependencyPoller

	// drained holds the drains of deleted pods, read from their final status when the
	// watch saw it, until the Gateway's next status patch records them.
	drained drainInbox

	// ownWrites remembers (as an ownWrite) each Gateway's last status patch by
	// this operator, so that the watch event of its own write costs no reconcile.
	ownWrites sync.Map
}

// +kubebuilder:rbac:groups=ferrofed.io,resources=gateways,verbs=get;list;watch
// +kubebuilder:rbac:groups=ferrofed.io,resources=gateways/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=configmaps;services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// The HorizontalPodAutoscaler of spec.autoscaling; and the Deployment's spec.replicas
// handed over to it (replicasSeed), an apply of the Deployment.
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// The page-token Secret of each Gateway: made once, read by name to check that the
// Gateway controls it. No list or watch: those would read every Secret.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create
// The gateway pods, for how each drain went (their termination messages).
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// Reconcile makes one lifecycle plan, renders the configuration from it, applies the
// owned objects, and patches the status once, in a deferred function, whatever happened.
// A configuration config check refuses is never rolled out: the objects are then applied
// from the last valid rendering (the live ConfigMap), so that drift of the fields that
// keep drains safe is still repaired.
func (r *GatewayReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	gw := &ferrofedv1alpha1.Gateway{}
	if err := r.Get(ctx, req.NamespacedName, gw); err != nil {
		if apierrors.IsNotFound(err) {
			r.ownWrites.Delete(req.NamespacedName)
			auditUndelivered.DeleteLabelValues(req.Namespace + "/" + req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !gw.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, gw)
	}
	// A persistent spool's claims outlive the pods: the finalizer is set before the
	// StatefulSet that makes them, so that no claim ever exists without it.
	persistent := gw.Spec.PersistentSpool()
	if persistent {
		if err := r.setFinalizer(ctx, gw, true); err != nil {
			return ctrl.Result{}, err
		}
	}
	plan := gatewayspec.Plan(&gw.Spec)
	outcome, err := r.renderConfig(ctx, gw, plan)
	if err != nil {
		return ctrl.Result{}, err
	}
	// dep (or sts, with a persistent spool) is the live workload, or the apply's
	// response, for the status.
	dep, sts, applied := &appsv1.Deployment{}, &appsv1.StatefulSet{}, false
	var problem applyProblem
	var changed changes
	var spool *spoolResult
	var requeue time.Duration
	defer func() {
		r.tellChanges(gw, changed)
		var observed *appsv1.Deployment
		switch {
		case persistent && (applied || r.Get(ctx, req.NamespacedName, sts) == nil):
			observed = statefulSetView(sts)
		case !persistent && (applied || r.Get(ctx, req.NamespacedName, dep) == nil):
			observed = dep
		}
		retErr = errors.Join(retErr, r.patchStatus(ctx, gw, plan, observed, outcome, problem, spool, retErr != nil))
	}()
	if !gatewayspec.ImageAllowed(r.AllowedImages, gw.Spec.Image) {
		problem = applyProblem{ferrofedv1alpha1.ReasonImageNotAllowed, gatewayspec.ImageMessage(r.AllowedImages, gw.Spec.Image)}
		return ctrl.Result{}, nil
	}
	rendered, rolloutPlan := outcome.rendered, plan
	if !outcome.valid() {
		var ok bool
		if rendered, rolloutPlan, ok = r.lastValidRendering(ctx, gw); !ok {
			return ctrl.Result{}, nil // nothing was ever rolled out, and nothing will be
		}
	}
	if err := r.ensurePageTokenSecret(ctx, gw, &changed); errors.As(err, &problem) {
		return ctrl.Result{RequeueAfter: conflictRecheck}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	owned, err := ownedObjects(gw, rolloutPlan, rendered, r.operatorJWKS(), dep, sts, r.otherWorkloadGoes(ctx, gw, persistent))
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, o := range owned {
		if o.kind == "ConfigMap" && !outcome.valid() {
			continue // the last valid rendering stays as it is
		}
		if o.desired == nil {
			err = r.deleteOwned(ctx, gw, o, &changed)
		} else {
			err = r.apply(ctx, gw, o, &changed)
		}
		if errors.As(err, &problem) {
			if problem.reason == ferrofedv1alpha1.ReasonNameConflict {
				// Resolved by someone deleting or renaming the other object, which
				// sends this operator no event: look again later.
				return ctrl.Result{RequeueAfter: conflictRecheck}, nil
			}
			if problem.reason == ferrofedv1alpha1.ReasonStatefulSetRecreating {
				return ctrl.Result{RequeueAfter: recreateRecheck}, nil // see recreate.go
			}
			return ctrl.Result{}, err
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		applied = applied || (o.desired != nil && (o.live == dep && !persistent || o.live == sts && persistent))
	}
	if needsSpoolPass(gw) {
		res, err := r.reconcileSpool(ctx, gw, rendered, persistent)
		spool, requeue = &res, res.requeue
		if err != nil {
			return ctrl.Result{}, err
		}
		if !persistent && res.claimsLeft == 0 {
			// An emptyDir spool and every claim handed over: nothing left to hold.
			if err := r.setFinalizer(ctx, gw, false); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// otherWorkloadGoes reports whether the workload of the other spool mode (the
// Deployment with a persistent spool, the StatefulSet without) may be deleted: only once
// the workload of this mode runs every replica ready with its latest template, so that
// switching modes drops no request. The old pods then drain as usual.
func (r *GatewayReconciler) otherWorkloadGoes(ctx context.Context, gw *ferrofedv1alpha1.Gateway, persistent bool) bool {
	key := client.ObjectKeyFromObject(gw)
	var live *appsv1.Deployment
	if persistent {
		s := &appsv1.StatefulSet{}
		if r.Get(ctx, key, s) == nil && controlledBy(s, gw) {
			live = statefulSetView(s)
		}
	} else {
		d := &appsv1.Deployment{}
		if r.Get(ctx, key, d) == nil && controlledBy(d, gw) {
			live = d
		}
	}
	return workloadReady(live, wantReplicas(gw, live))
}

// ensurePageTokenSecret makes the Gateway's page-token Secret once: a random key every
// replica authenticates its paging tokens with (federation.page_token_key_file). It is
// never rewritten, so that next links stay valid across rollouts; deleted, it is made
// anew on the next reconcile. A Secret of that name the Gateway does not control is
// left alone and reported, as any name conflict.
func (r *GatewayReconciler) ensurePageTokenSecret(ctx context.Context, gw *ferrofedv1alpha1.Gateway, changed *changes) error {
	name := gatewayspec.PageTokenSecretName(gw.Name)
	// Secrets are read from the apiserver (never cached): a Gateway never reconciled
	// has none yet, almost surely, so its Secret is created at once and read only
	// when one of that name exists.
	if neverReconciled(gw) {
		err := r.createPageTokenSecret(ctx, gw, name, changed)
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	s := &corev1.Secret{}
	err := r.Get(ctx, types.NamespacedName{Namespace: gw.Namespace, Name: name}, s)
	switch {
	case err == nil && controlledBy(s, gw):
		return nil
	case err == nil:
		return r.nameConflict(gw, s, "Secret", name, "Create")
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("get Secret %s: %w", name, err)
	}
	if err := r.createPageTokenSecret(ctx, gw, name, changed); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%w (made meanwhile; the next reconcile checks its owner)", err)
		}
		return err
	}
	return nil
}

// createPageTokenSecret creates the page-token Secret with a new random key; the
// error wraps the apiserver's (AlreadyExists when one of that name exists).
func (r *GatewayReconciler) createPageTokenSecret(ctx context.Context, gw *ferrofedv1alpha1.Gateway, name string, changed *changes) error {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("make the page-token key: %w", err)
	}
	secret := PageTokenSecret(gw, []byte(hex.EncodeToString(key)))
	if err := r.Create(ctx, secret); err != nil {
		return fmt.Errorf("create Secret %s: %w", name, err)
	}
	changed.add(verbCreated, "Secret", name, secret)
	return nil
}

// conflictRecheck is how often a Gateway whose name is taken looks again.
const conflictRecheck = 30 * time.Second

// lastValidRendering is the ferrofed.toml of the live ConfigMap this Gateway controls,
// with the plan it was rendered with (its budgets and grace period), or false when
// there is none.
func (r *GatewayReconciler) lastValidRendering(ctx context.Context, gw *ferrofedv1alpha1.Gateway) ([]byte, lifecycle.Plan, bool) {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(gw), cm); err != nil || !controlledBy(cm, gw) {
		return nil, lifecycle.Plan{}, false
	}
	data := []byte(cm.Data[gatewayspec.ConfigFileName])
	cfg, err := gatewayspec.ParseRendered(data)
	if err != nil {
		return nil, lifecycle.Plan{}, false // edited by hand into something invalid: leave it
	}
	return data, cfg.Lifecycle(), true
}

// ownedObject is one object a Gateway owns, named after it, in the order applied.
type ownedObject struct {
	kind string
	// live receives the object as the apiserver has it.
	live client.Object
	// desired is its apply configuration, or nil when the object must not exist (it is
	// then deleted, if the Gateway controls it).
	desired runtime.ApplyConfiguration
	// uncached: the client reads this kind from the apiserver, not from the cache, so
	// that its NotFound needs no second look through the APIReader.
	uncached bool
	// createOnly is desired again, made to create the object and fail on any existing
	// one (see createOnlyVersion): for a cached kind missing from the cache, and for an
	// uncached kind of a Gateway never reconciled (neverReconciled). build sets it with
	// desired.
	createOnly func() runtime.ApplyConfiguration
	// seed, when set, is what ReplicasOwner applies to the live object before it is
	// applied, and once it is created (replicasSeed; nil: nothing to hand over).
	seed func() runtime.ApplyConfiguration
}

// neverReconciled reports whether no reconcile has written gw's status yet (every
// reconcile writes its observedGeneration): the objects named after it almost surely
// do not exist, so the kinds read from the apiserver are created at once and read
// only when that finds one. A Gateway whose first status patch failed is taken for
// new again, which costs one refused create.
func neverReconciled(gw *ferrofedv1alpha1.Gateway) bool {
	return gw.Status.ObservedGeneration == 0
}

// createOnlyVersion is the resourceVersion a create-only apply carries. In an apply a
// resourceVersion is a precondition: the apiserver refuses, with a Conflict, to change
// an existing object whose resourceVersion differs (and no object still has "1", the
// first revision of the cluster's store), while an object that does not exist is
// created. So an object missing from the cache costs one request, not a read and an
// apply, and an existing object of that name is still never touched before it is read.
const createOnlyVersion = "1"

// ownedObjects is the one table of what a Gateway owns: the ConfigMap first (the pods
// mount it), then the workload (a Deployment into dep, or with a persistent spool a
// StatefulSet into sts), the Service, with more than one replica at the least the
// PodDisruptionBudget, and with spec.autoscaling the HorizontalPodAutoscaler (without
// it, deleted before the workload is applied). The workload of the other spool mode
// is deleted when otherGoes (otherWorkloadGoes), and left alone until then.
func ownedObjects(gw *ferrofedv1alpha1.Gateway, plan lifecycle.Plan, rendered []byte, jwks string, dep *appsv1.Deployment, sts *appsv1.StatefulSet, otherGoes bool) ([]ownedObject, error) {
	cm := ownedObject{kind: "ConfigMap", live: &corev1.ConfigMap{}, uncached: true} // see ManagerOptions' client options
	deployment := ownedObject{kind: "Deployment", live: dep}
	statefulSet := ownedObject{kind: "StatefulSet", live: sts}
	svc := ownedObject{kind: "Service", live: &corev1.Service{}}
	pdb := ownedObject{kind: "PodDisruptionBudget", live: &policyv1.PodDisruptionBudget{}}
	hpa := ownedObject{kind: "HorizontalPodAutoscaler", live: &autoscalingv2.HorizontalPodAutoscaler{}}
	err := errors.Join(
		build(&cm, func() *corev1ac.ConfigMapApplyConfiguration { return ConfigMap(gw, rendered, jwks) }),
		build(&svc, func() *corev1ac.ServiceApplyConfiguration { return Service(gw, rendered) }))
	var workloads []ownedObject
	if gw.Spec.PersistentSpool() {
		err = errors.Join(err, build(&statefulSet, func() *appsv1ac.StatefulSetApplyConfiguration { return StatefulSet(gw, plan, rendered) }))
		workloads = []ownedObject{statefulSet}
		if otherGoes {
			workloads = append(workloads, deployment)
		}
	} else {
		err = errors.Join(err, build(&deployment, func() *appsv1ac.DeploymentApplyConfiguration { return Deployment(gw, plan, rendered) }))
		deployment.seed = func() runtime.ApplyConfiguration {
			if seed := replicasSeed(gw, dep); seed != nil {
				return seed
			}
			return nil
		}
		workloads = []ownedObject{deployment}
		if otherGoes {
			workloads = append(workloads, statefulSet)
		}
	}
	if PodDisruptionBudget(gw) != nil {
		err = errors.Join(err, build(&pdb, func() *policyv1ac.PodDisruptionBudgetApplyConfiguration { return PodDisruptionBudget(gw) }))
	}
	if HorizontalPodAutoscaler(gw) == nil {
		// Gone before the workload takes spec.replicas back: no last scaling between.
		return append(append([]ownedObject{cm, hpa}, workloads...), svc, pdb), err
	}
	err = errors.Join(err, build(&hpa, func() *autoscalingv2ac.HorizontalPodAutoscalerApplyConfiguration { return HorizontalPodAutoscaler(gw) }))
	return append(append([]ownedObject{cm}, workloads...), svc, pdb, hpa), err
}

// ownedKind is the apply configuration of an owned kind.
type ownedKind[T any] interface {
	annotatable[T]
	WithResourceVersion(string) T
}

// build sets o's desired configuration and its create-only form from newConfig, each
// stamped with AnnotationAppliedConfig, the digest of the configuration before it is
// stamped. The create-only form is made anew when it is needed: a configuration's With
// methods change it in place.
func build[T ownedKind[T]](o *ownedObject, newConfig func() T) error {
	desired := newConfig()
	sum, err := configDigest(desired)
	if err != nil {
		return err
	}
	o.desired = withApplied(desired, sum)
	o.createOnly = func() runtime.ApplyConfiguration {
		return withApplied(newConfig(), sum).WithResourceVersion(createOnlyVersion)
	}
	return nil
}

// renderConfig reads the referenced ConfigMap, if any, renders ferrofed.toml and runs
// `config check` on it. A refused configuration is an outcome, not an error.
func (r *GatewayReconciler) renderConfig(ctx context.Context, gw *ferrofedv1alpha1.Gateway, plan lifecycle.Plan) (configOutcome, error) {
	var user []byte
	if c := gw.Spec.Config; c != nil && c.Inline != nil {
		user = []byte(*c.Inline)
	} else if c != nil && c.ConfigMapRef != nil {
		ref := c.ConfigMapRef
		key := ref.Key
		if key == "" {
			key = ferrofedv1alpha1.DefaultConfigMapKey
		}
		cm := &corev1.ConfigMap{}
		err := r.Get(ctx, types.NamespacedName{Namespace: gw.Namespace, Name: ref.Name}, cm)
		if apierrors.IsNotFound(err) {
			return configOutcome{reason: ferrofedv1alpha1.ReasonConfigMapNotFound,
				message: fmt.Sprintf("ConfigMap %s, named by spec.config.configMapRef, does not exist.", ref.Name)}, nil
		} else if err != nil {
			return configOutcome{}, fmt.Errorf("get ConfigMap %s: %w", ref.Name, err)
		}
		data, ok := cm.Data[key]
		if !ok {
			return configOutcome{reason: ferrofedv1alpha1.ReasonConfigMapNotFound,
				message: fmt.Sprintf("ConfigMap %s has no key %q (spec.config.configMapRef.key).", ref.Name, key)}, nil
		}
		user = []byte(data)
	}
	var rendered []byte
	var err error
	if r.Poller != nil {
		rendered, err = gatewayspec.RenderForPolling(&gw.Spec, plan, user, gatewayspec.OperatorIssuer(gw.Namespace, gw.Name), r.Poller.Issuer.KeyID())
	} else {
		rendered, err = gatewayspec.RenderAndCheck(&gw.Spec, plan, user)
	}
	if err != nil {
		return configOutcome{reason: ferrofedv1alpha1.ReasonInvalidConfig, message: gatewayspec.ConfigMessage(err)}, nil
	}
	return configOutcome{rendered: rendered}, nil
}

// apply server-side applies desired unless the fields FieldOwner manages on the live
// object already hold exactly the desired values. On success live holds the object as
// the apiserver has it: the cached object, or the apply's response.
//
// An existing object of that name that this Gateway does not control is never adopted:
// the answer is an applyProblem with ReasonNameConflict, and the object is left alone.
func (r *GatewayReconciler) apply(ctx context.Context, gw *ferrofedv1alpha1.Gateway, o ownedObject, changed *changes) error {
	kind, name, live, desired := o.kind, gw.Name, o.live, o.desired
	key := client.ObjectKeyFromObject(gw)
	if o.uncached && neverReconciled(gw) {
		// An uncached kind costs a read from the apiserver: for a Gateway that has
		// never been reconciled the object is created create-only at once, and read
		// only when one of that name exists.
		if done, err := r.createOnly(ctx, gw, o, changed); done {
			return err
		}
	}
	err := r.Get(ctx, key, live)
	if apierrors.IsNotFound(err) && !o.uncached {
		// The cache holds only objects labelled as the operator's: one of this name
		// without the label must be seen before it is taken over. Created create-only
		// first, it is read only when it exists; a Gateway already told of a name
		// conflict reads first, so that its rechecks write nothing.
		if readyReason(gw.Status) != ferrofedv1alpha1.ReasonNameConflict {
			if done, err := r.createOnly(ctx, gw, o, changed); done {
				return err
			}
		}
		reader := r.reader()
		err = reader.Get(ctx, key, live)
	}
	switch {
	case err == nil:
		if !controlledBy(live, gw) {
			return r.nameConflict(gw, live, kind, name, "Apply")
		}
		if sts, ok := live.(*appsv1.StatefulSet); ok && sts.DeletionTimestamp != nil {
			return statefulSetGoing(gw, sts, typedStatefulSet(desired)) // made again once gone
		}
		if err := r.seedReplicas(ctx, gw, o); err != nil {
			return err
		}
		if same, err := sameAsLive(live, desired); err != nil || same {
			return err
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("get %s %s: %w", kind, name, err)
	}
	if aerr := r.Apply(ctx, desired, client.FieldOwner(FieldOwner), client.ForceOwnership); aerr != nil {
		if _, ok := live.(*appsv1.StatefulSet); ok && err == nil {
			return r.recreateStatefulSet(ctx, gw, o, aerr) // immutable fields: made again
		}
		return r.applyFailed(gw, kind, name, aerr)
	}
	verb := verbUpdated
	if apierrors.IsNotFound(err) {
		verb = verbCreated
	}
	return r.applied(ctx, gw, o, desired, verb, changed)
}

// createOnly applies o's create-only form: done is false when an object of the name
// exists (a Conflict), which the caller then reads; otherwise the object was created,
// or err says why not.
func (r *GatewayReconciler) createOnly(ctx context.Context, gw *ferrofedv1alpha1.Gateway, o ownedObject, changed *changes) (done bool, err error) {
	created := o.createOnly()
	switch cerr := r.Apply(ctx, created, client.FieldOwner(FieldOwner), client.ForceOwnership); {
	case cerr == nil:
		return true, r.applied(ctx, gw, o, created, verbCreated, changed)
	case !apierrors.IsConflict(cerr):
		return true, r.applyFailed(gw, o.kind, gw.Name, cerr)
	}
	return false, nil
}

// applied records a successful apply of o: live takes the response, which the client
// decoded into sent. An object just created gets its seed (replicasSeed).
func (r *GatewayReconciler) applied(ctx context.Context, gw *ferrofedv1alpha1.Gateway, o ownedObject, sent runtime.ApplyConfiguration, verb string, changed *changes) error {
	if err := fromApplyResponse(sent, o.live); err != nil {
		return err
	}
	changed.add(verb, o.kind, gw.Name, o.live)
	if verb == verbCreated {
		return r.seedReplicas(ctx, gw, o)
	}
	return nil
}

// seedReplicas applies o's seed, if it has one now, as ReplicasOwner: the live
// Deployment's spec.replicas is then held by a manager other than FieldOwner, so that
// the operator's apply without it leaves it as it is (docs/operator.md, "Autoscaling
// and spread"). live takes the response.
func (r *GatewayReconciler) seedReplicas(ctx context.Context, gw *ferrofedv1alpha1.Gateway, o ownedObject) error {
	if o.seed == nil {
		return nil
	}
	seed := o.seed()
	if seed == nil {
		return nil
	}
	switch err := r.Apply(ctx, seed, client.FieldOwner(ReplicasOwner), client.ForceOwnership); {
	case apierrors.IsConflict(err):
		// The Deployment changed since it was read: the retry reads it again.
		return fmt.Errorf("hand spec.replicas of %s %s over to the autoscaler: %w", o.kind, gw.Name, err)
	case err != nil:
		return r.applyFailed(gw, o.kind, gw.Name, fmt.Errorf("hand spec.replicas over to the autoscaler: %w", err))
	}
	return fromApplyResponse(seed, o.live)
}

// applyFailed counts a refused apply (ferrofed_operator_apply_failures_total), tells it
// in an Event, and in the status when a retry would be refused the same way.
func (r *GatewayReconciler) applyFailed(gw *ferrofedv1alpha1.Gateway, kind, name string, err error) error {
	applyFailures.WithLabelValues(kind).Inc()
	r.Recorder.Eventf(gw, nil, corev1.EventTypeWarning, "FailedApply", "Apply", "Failed to apply %s %s: %s", kind, name, eventNote(err.Error()))
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsForbidden(err) {
		// The apiserver's own words, in the status: a retry would say the same.
		return errors.Join(applyProblem{ferrofedv1alpha1.ReasonApplyFailed, fmt.Sprintf("%s %s: %v", kind, name, err)},
			fmt.Errorf("apply %s %s: %w", kind, name, err))
	}
	return fmt.Errorf("apply %s %s: %w", kind, name, err)
}

// nameConflict is the answer to an object of an owned name that gw does not control:
// it is left alone, told once in an Event (not on every recheck), and reported.
func (r *GatewayReconciler) nameConflict(gw *ferrofedv1alpha1.Gateway, obj client.Object, kind, name, action string) applyProblem {
	if readyReason(gw.Status) != ferrofedv1alpha1.ReasonNameConflict {
		r.Recorder.Eventf(gw, obj, corev1.EventTypeWarning, ferrofedv1alpha1.ReasonNameConflict, action,
			"Left %s %s alone: it exists and is not controlled by this Gateway.", kind, name)
	}
	return applyProblem{ferrofedv1alpha1.ReasonNameConflict, fmt.Sprintf(
		"%s %s already exists and is not controlled by this Gateway (%s); the operator never adopts an object (nor mounts one it does not control). Delete or rename it, or give the Gateway another name.",
		kind, name, controllerOf(obj))}
}

// controlledBy reports whether gw is obj's controller.
func controlledBy(obj client.Object, gw *ferrofedv1alpha1.Gateway) bool {
	owner := metav1.GetControllerOf(obj)
	return owner != nil && owner.UID == gw.UID
}

// controllerOf names obj's controller for a message.
func controllerOf(obj client.Object) string {
	if owner := metav1.GetControllerOf(obj); owner != nil {
		return fmt.Sprintf("its controller is %s %s", owner.Kind, owner.Name)
	}
	return "it has no controller"
}

// fromApplyResponse copies the apply's response, which the client decoded into desired,
// into live.
func fromApplyResponse(desired runtime.ApplyConfiguration, live client.Object) error {
	data, err := json.Marshal(desired)
	if err != nil {
		return fmt.Errorf("read apply response: %w", err)
	}
	return json.Unmarshal(data, live)
}

// deleteOwned deletes the object named after gw when gw controls it.
func (r *GatewayReconciler) deleteOwned(ctx context.Context, gw *ferrofedv1alpha1.Gateway, o ownedObject, changed *changes) error {
	kind, obj := o.kind, o.live
	if err := r.Get(ctx, client.ObjectKeyFromObject(gw), obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !controlledBy(obj, gw) {
		return nil
	}
	policy := metav1.DeletePropagationBackground
	if kind == "Deployment" && gw.Spec.PersistentSpool() {
		// Its pods' emptyDir spools must be delivered first: they are retired, not
		// deleted (reconcileRetiring).
		policy = metav1.DeletePropagationOrphan
	}
	if obj.GetDeletionTimestamp() != nil &&
		(policy == metav1.DeletePropagationOrphan || !slices.Contains(obj.GetFinalizers(), metav1.FinalizerOrphanDependents)) {
		return nil // its deletion is under way, as wanted
	}
	// Background, explicitly: it also turns the Orphan delete of a StatefulSet being
	// made again (recreate.go) into one that takes its pods, which drain as usual.
	if err := r.Delete(ctx, obj, client.PropagationPolicy(policy)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete %s %s: %w", kind, obj.GetName(), err)
	}
	changed.add(verbDeleted, kind, obj.GetName(), obj)
	return nil
}

// patchStatus writes the status, with one merge patch, only when it changed; a
// configuration newly refused is also told as a Warning event. After a failed apply the
// status still tells what is observed, but observedGeneration stays where it was: the
// generation has not been fully rolled out, and the retry will say when it is.
func (r *GatewayReconciler) patchStatus(ctx context.Context, gw *ferrofedv1alpha1.Gateway, plan lifecycle.Plan, dep *appsv1.Deployment, o configOutcome, ap applyProblem, spool *spoolResult, failed bool) error {
	key := client.ObjectKeyFromObject(gw)
	drained := r.drained.take(key)
	st := desiredStatus(gw, plan, dep, o, ap, drained)
	var reports map[string]claimFigures
	if spool != nil {
		st.Audit, reports = spool.status, spool.reports
		setAuditCondition(&st, gw.Generation)
	}
	setAuditMetric(gw, st.Audit)
	if r.Poller != nil {
		polled := r.Poller.Summary(gw)
		setDependencies(&st, gw.Generation, polled.deps, polled.reports, polled.why)
	}
	if failed {
		st.ObservedGeneration = gw.Status.ObservedGeneration
	}
	if equality.Semantic.DeepEqual(st, gw.Status) {
		return nil
	}
	wasInvalid := !conditionTrue(gw.Status, ferrofedv1alpha1.ConditionConfigValid) && len(gw.Status.Conditions) > 0
	before := gw.Status.Conditions
	// The whole status goes in the patch, zeros included (a diff would leave out a
	// replicas: 0 that was never written). The resourceVersion makes it conditional:
	// st was computed from the cached Gateway, and a cache that has not seen this
	// operator's last patch yet would have it write back older status.drains, losing the
	// drains that patch recorded (seen on a real node: rollouts whose Deployment status
	// and pod ends land together). On a conflict the drains go back to the inbox and the
	// retry computes from a fresher Gateway.
	patch, err := statusPatch(gw.ResourceVersion, st)
	if err != nil {
		return fmt.Errorf("patch Gateway status: %w", err)
	}
	// Known before the patch is sent: its watch event can arrive before the answer.
	sum, err := statusSum(st)
	if err != nil {
		return fmt.Errorf("patch Gateway status: %w", err)
	}
	r.ownWrites.Store(key, ownWrite{status: sum})
	gw.Status = st
	if err := r.Status().Patch(ctx, gw, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if !apierrors.IsNotFound(err) {
			r.drained.putBack(key, drained) // told on the retry
			r.drained.putBackAudit(key, reports)
		}
		return fmt.Errorf("patch Gateway status: %w", client.IgnoreNotFound(err))
	}
	for _, d := range drained {
		r.tellDrain(gw, d)
	}
	r.tellDependencies(gw, before, st.Conditions)
	r.ownWrites.Store(key, ownWrite{resourceVersion: gw.ResourceVersion, status: sum}) // the patch's answer: its event needs no reconcile
	if !o.valid() && !wasInvalid {
		r.Recorder.Eventf(gw, nil, corev1.EventTypeWarning, o.reason, "Render", "Refused the configuration: %s", eventNote(o.message))
	}
	return nil
}

// statusPatch is the merge patch that writes st whole, conditional on resourceVersion:
// an absent status.audit is written as null, so that the audit of claims all handed over
// goes.
func statusPatch(resourceVersion string, st ferrofedv1alpha1.GatewayStatus) ([]byte, error) {
	data, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	var status map[string]any
	if err := json.Unmarshal(data, &status); err != nil {
		return nil, err
	}
	if status["audit"], err = auditPatch(st.Audit); err != nil {
		return nil, err
	}
	if status["dependencies"], err = dependenciesPatch(st.Dependencies); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": resourceVersion}, "status": status})
}

// auditPatch is status.audit as a merge patch writes it whole: null when absent, and
// each of its fields that marshals to nothing (an emptied list, a zero count) as null,
// so that a merge patch removes what the last one wrote.
func auditPatch(a *ferrofedv1alpha1.AuditStatus) (any, error) {
	if a == nil {
		return nil, nil
	}
	return wholePatch(a, "claims", "claimsNotListed", "retiringPods")
}

// dependenciesPatch is status.dependencies written whole, as auditPatch.
func dependenciesPatch(d *ferrofedv1alpha1.DependenciesStatus) (any, error) {
	if d == nil {
		return nil, nil
	}
	return wholePatch(d, "lastPollTime", "membersReachable", "keys", "keysNotListed", "pods")
}

// wholePatch is v as a JSON object with each of keys it leaves out set to null.
func wholePatch(v any, keys ...string) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			m[k] = nil
		}
	}
	return m, nil
}

// maxEventNote is what the Events API keeps of a note (1024 bytes), less the room the
// formats around it take.
const maxEventNote = 900

// eventNote cuts s to fit an Event's note; the full text is in the status.
func eventNote(s string) string {
	if len(s) <= maxEventNote {
		return s
	}
	return s[:maxEventNote] + "... (the Gateway's status has it all)"
}

func readyReason(st ferrofedv1alpha1.GatewayStatus) string {
	for _, c := range st.Conditions {
		if c.Type == ferrofedv1alpha1.ConditionReady {
			return c.Reason
		}
	}
	return ""
}

func conditionTrue(st ferrofedv1alpha1.GatewayStatus, t string) bool {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status == "True"
		}
	}
	return false
}

// SetupWithManager watches Gateways, the objects they own and the ConfigMaps they
// reference.
// maxConcurrent <= 0 means DefaultMaxConcurrentReconciles.
func (r *GatewayReconciler) SetupWithManager(mgr ctrl.Manager, maxConcurrent int) error {
	if maxConcurrent <= 0 {
		maxConcurrent = DefaultMaxConcurrentReconciles
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &ferrofedv1alpha1.Gateway{}, configMapRefIndex,
		func(o client.Object) []string {
			if c := o.(*ferrofedv1alpha1.Gateway).Spec.Config; c != nil && c.ConfigMapRef != nil {
				return []string{c.ConfigMapRef.Name}
			}
			return nil
		}); err != nil {
		return fmt.Errorf("index Gateways by ConfigMap: %w", err)
	}
	// A Gateway's own status patch changes neither its generation nor its metadata:
	// no reconcile for it. An owned object's creation is the reconciler's own doing
	// (and at start every Gateway is reconciled anyway); its updates and deletions,
	// drift or the Deployment's rollout status, are what matter.
	// A status changed by anyone else is rewritten: a Gateway's own status patch
	// triggers one reconcile more, which finds nothing to write.
	gatewayChanged := predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{},
		predicate.LabelChangedPredicate{}, statusChanged{own: &r.ownWrites})
	notCreated := predicate.Funcs{CreateFunc: func(event.CreateEvent) bool { return false }}
	deletedOnly := predicate.Funcs{CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(event.UpdateEvent) bool { return false }, GenericFunc: func(event.GenericEvent) bool { return false }}
	// ConfigMaps are watched as metadata only (no data in memory): the owned one and
	// every one a Gateway references, which the reconciler then reads by name.
	b := ctrl.NewControllerManagedBy(mgr)
	if r.Poller != nil {
		// A Gateway whose polled reports changed: its status says so.
		b = b.WatchesRawSource(source.Channel(r.Poller.Events, &handler.EnqueueRequestForObject{}))
	}
	return b.
		For(&ferrofedv1alpha1.Gateway{}, builder.WithPredicates(gatewayChanged)).
		Owns(&corev1.ConfigMap{}, builder.OnlyMetadata, builder.WithPredicates(notCreated)).
		Owns(&appsv1.Deployment{}, builder.WithPredicates(notCreated)).
		Owns(&appsv1.StatefulSet{}, builder.WithPredicates(notCreated)).
		Owns(&batchv1.Job{}, builder.WithPredicates(notCreated)).
		Owns(&corev1.Service{}, builder.WithPredicates(notCreated)).
		Owns(&policyv1.PodDisruptionBudget{}, builder.WithPredicates(notCreated)).
		Owns(&autoscalingv2.HorizontalPodAutoscaler{}, builder.WithPredicates(notCreated)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.gatewaysReferencing), builder.OnlyMetadata).
		// A gateway pod deleted and terminated: its drain goes into the status.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.podDrained)).
		// A replica's pod gone releases its claim for the hand-over; a claim made or
		// deleted changes status.audit.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.podGone), builder.WithPredicates(deletedOnly)).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(r.claimChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: maxConcurrent}).
		Complete(traced(r, r.TracerProvider))
}

// statusChanged passes updates whose status differs, unless the update is the
// operator's own status patch: its resourceVersion is the one the patch answered with,
// or (when the watch event comes before the patch's answer, as it does on a busy
// control plane) its status is the one the patch sent. Anyone else's change of the
// status is rewritten by the next reconcile.
type statusChanged struct {
	predicate.Funcs
	own *sync.Map // Gateway name -> ownWrite
}

// ownWrite is the operator's last status patch of a Gateway: the resourceVersion it
// answered with (empty until it has) and the statusSum of the status it sent.
type ownWrite struct {
	resourceVersion string
	status          [sha256.Size]byte
}

// statusSum is a digest of a status as JSON: the status a patch sends and the status
// its watch event brings back marshal alike (times are kept to the second).
func statusSum(st ferrofedv1alpha1.GatewayStatus) ([sha256.Size]byte, error) {
	data, err := json.Marshal(st)
	return sha256.Sum256(data), err
}

func (p statusChanged) Update(e event.UpdateEvent) bool {
	old, okOld := e.ObjectOld.(*ferrofedv1alpha1.Gateway)
	cur, okNew := e.ObjectNew.(*ferrofedv1alpha1.Gateway)
	if !okOld || !okNew || equality.Semantic.DeepEqual(old.Status, cur.Status) {
		return false
	}
	v, ok := p.own.Load(client.ObjectKeyFromObject(cur))
	if !ok {
		return true
	}
	own := v.(ownWrite)
	if own.resourceVersion == cur.ResourceVersion {
		return false
	}
	sum, err := statusSum(cur.Status)
	return err != nil || sum != own.status
}

func (r *GatewayReconciler) gatewaysReferencing(ctx context.Context, o client.Object) []reconcile.Request {
	var list ferrofedv1alpha1.GatewayList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{configMapRefIndex: o.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, gw := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&gw)})
	}
	return out
}
