package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// configMapRefIndex indexes Gateways by the ConfigMap their spec.config.configMapRef names.
const configMapRefIndex = "spec.config.configMapRef.name"

// GatewayReconciler makes the ConfigMap, Deployment, Service and PodDisruptionBudget of
// each Gateway match its spec, and reports what it did in the Gateway's status.
//
// An unchanged Gateway costs no write: before applying an object, the reconciler
// extracts from the live object (the cache) the fields FieldOwner manages, with their
// live values, and skips the apply when they equal the desired apply configuration.
// Someone else changing one of those fields takes it over, which makes the extracted
// configuration differ, so drift is still repaired (with ForceOwnership).
type GatewayReconciler struct {
	client.Client
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=ferrofed.io,resources=gateways,verbs=get;list;watch
// +kubebuilder:rbac:groups=ferrofed.io,resources=gateways/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=configmaps;services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile makes one lifecycle plan, renders the configuration from it, applies the
// owned objects when it passes, and patches the status once, in a deferred function,
// whatever happened.
func (r *GatewayReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	gw := &ferrofedv1alpha1.Gateway{}
	if err := r.Get(ctx, req.NamespacedName, gw); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !gw.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the garbage collector removes the owned objects
	}
	plan := gw.Spec.Plan()
	outcome, err := r.renderConfig(ctx, gw, plan)
	if err != nil {
		return ctrl.Result{}, err
	}
	// dep is the live Deployment, or the apply's response, for the status.
	dep, applied := &appsv1.Deployment{}, false
	defer func() {
		var observed *appsv1.Deployment
		if applied || r.Get(ctx, req.NamespacedName, dep) == nil {
			observed = dep
		}
		retErr = errors.Join(retErr, r.patchStatus(ctx, gw, plan, observed, outcome, retErr != nil))
	}()
	if !outcome.valid() {
		return ctrl.Result{}, nil // never roll out a configuration config check refuses
	}
	for _, o := range ownedObjects(gw, plan, outcome.rendered, dep) {
		if o.desired == nil {
			err = r.deleteOwned(ctx, gw, o)
		} else {
			err = r.apply(ctx, gw, o)
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		applied = applied || o.live == dep
	}
	return ctrl.Result{}, nil
}

// ownedObject is one object a Gateway owns, named after it, in the order applied.
type ownedObject struct {
	kind string
	// live receives the object as the apiserver has it.
	live client.Object
	// desired is its apply configuration, or nil when the object must not exist (it is
	// then deleted, if the Gateway controls it).
	desired runtime.ApplyConfiguration
	// extract reads the fields FieldOwner manages from a live object.
	extract func(client.Object) (any, error)
}

// ownedObjects is the one table of what a Gateway owns: the ConfigMap first (the pods
// mount it), then the Deployment (into dep), the Service and, with more than one
// replica, the PodDisruptionBudget.
func ownedObjects(gw *ferrofedv1alpha1.Gateway, plan lifecycle.Plan, rendered []byte, dep *appsv1.Deployment) []ownedObject {
	pdb := ownedObject{kind: "PodDisruptionBudget", live: &policyv1.PodDisruptionBudget{}, extract: func(o client.Object) (any, error) {
		return policyv1ac.ExtractPodDisruptionBudget(o.(*policyv1.PodDisruptionBudget), FieldOwner)
	}}
	if d := PodDisruptionBudget(gw); d != nil {
		pdb.desired = d
	}
	return []ownedObject{
		{kind: "ConfigMap", live: &corev1.ConfigMap{}, desired: ConfigMap(gw, rendered), extract: func(o client.Object) (any, error) {
			return corev1ac.ExtractConfigMap(o.(*corev1.ConfigMap), FieldOwner)
		}},
		{kind: "Deployment", live: dep, desired: Deployment(gw, plan, ConfigHash(rendered)), extract: func(o client.Object) (any, error) {
			return appsv1ac.ExtractDeployment(o.(*appsv1.Deployment), FieldOwner)
		}},
		{kind: "Service", live: &corev1.Service{}, desired: Service(gw), extract: func(o client.Object) (any, error) {
			return corev1ac.ExtractService(o.(*corev1.Service), FieldOwner)
		}},
		pdb,
	}
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
	rendered, err := ferrofedv1alpha1.RenderAndCheck(&gw.Spec, plan, user)
	if err != nil {
		return configOutcome{reason: ferrofedv1alpha1.ReasonInvalidConfig, message: ferrofedv1alpha1.ConfigMessage(err)}, nil
	}
	return configOutcome{rendered: rendered}, nil
}

// apply server-side applies desired unless the fields FieldOwner manages on the live
// object already hold exactly the desired values. On success live holds the object as
// the apiserver has it: the cached object, or the apply's response.
func (r *GatewayReconciler) apply(ctx context.Context, gw *ferrofedv1alpha1.Gateway, o ownedObject) error {
	kind, name, live, desired := o.kind, gw.Name, o.live, o.desired
	err := r.Get(ctx, client.ObjectKeyFromObject(gw), live)
	switch {
	case err == nil:
		if same, err := sameAsLive(live, desired, o.extract); err != nil || same {
			return err
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("get %s %s: %w", kind, name, err)
	}
	if err := r.Apply(ctx, desired, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		r.Recorder.Eventf(gw, nil, corev1.EventTypeWarning, "FailedApply", "Apply", "Failed to apply %s %s: %v", kind, name, err)
		return fmt.Errorf("apply %s %s: %w", kind, name, err)
	}
	verb := "Updated"
	if apierrors.IsNotFound(err) {
		verb = "Created"
	}
	if err := fromApplyResponse(desired, live); err != nil {
		return err
	}
	// The object goes in as related: events of one Gateway with the same reason would
	// otherwise fold into one series.
	r.Recorder.Eventf(gw, live, corev1.EventTypeNormal, verb, "Apply", "%s %s %s.", verb, kind, name)
	return nil
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

// sameAsLive compares the fields FieldOwner manages on live with desired. Both go
// through live's typed struct first, so that values the apiserver does not store
// (zeros of omitempty fields) compare equal to their absence.
func sameAsLive(live client.Object, desired runtime.ApplyConfiguration, extract func(client.Object) (any, error)) (bool, error) {
	got, err := extract(live)
	if err != nil {
		return false, fmt.Errorf("extract managed fields: %w", err)
	}
	a, err := asTyped(live, got)
	if err != nil {
		return false, err
	}
	b, err := asTyped(live, desired)
	return err == nil && a == b, err
}

func asTyped(proto client.Object, v any) (string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	obj := reflect.New(reflect.TypeOf(proto).Elem()).Interface()
	if err := json.Unmarshal(data, obj); err != nil {
		return "", err
	}
	data, err = json.Marshal(obj)
	return string(data), err
}

// deleteOwned deletes the object named after gw when gw controls it.
func (r *GatewayReconciler) deleteOwned(ctx context.Context, gw *ferrofedv1alpha1.Gateway, o ownedObject) error {
	kind, obj := o.kind, o.live
	if err := r.Get(ctx, client.ObjectKeyFromObject(gw), obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if owner := metav1.GetControllerOf(obj); owner == nil || owner.UID != gw.UID {
		return nil
	}
	if err := r.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete %s %s: %w", kind, obj.GetName(), err)
	}
	r.Recorder.Eventf(gw, obj, corev1.EventTypeNormal, "Deleted", "Delete", "Deleted %s %s.", kind, obj.GetName())
	return nil
}

// patchStatus writes the status, with one merge patch, only when it changed; a
// configuration newly refused is also told as a Warning event. After a failed apply the
// status still tells what is observed, but observedGeneration stays where it was: the
// generation has not been fully rolled out, and the retry will say when it is.
func (r *GatewayReconciler) patchStatus(ctx context.Context, gw *ferrofedv1alpha1.Gateway, plan lifecycle.Plan, dep *appsv1.Deployment, o configOutcome, failed bool) error {
	st := desiredStatus(gw, plan, dep, o)
	if failed {
		st.ObservedGeneration = gw.Status.ObservedGeneration
	}
	if equality.Semantic.DeepEqual(st, gw.Status) {
		return nil
	}
	wasInvalid := !conditionTrue(gw.Status, ferrofedv1alpha1.ConditionConfigValid) && len(gw.Status.Conditions) > 0
	// The whole status goes in the patch, zeros included (a diff would leave out a
	// replicas: 0 that was never written).
	patch, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return fmt.Errorf("patch Gateway status: %w", err)
	}
	gw.Status = st
	if err := r.Status().Patch(ctx, gw, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("patch Gateway status: %w", client.IgnoreNotFound(err))
	}
	if !o.valid() && !wasInvalid {
		r.Recorder.Eventf(gw, nil, corev1.EventTypeWarning, o.reason, "Render", "Refused the configuration: %s", o.message)
	}
	return nil
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
	gatewayChanged := predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{})
	notCreated := predicate.Funcs{CreateFunc: func(event.CreateEvent) bool { return false }}
	return ctrl.NewControllerManagedBy(mgr).
		For(&ferrofedv1alpha1.Gateway{}, builder.WithPredicates(gatewayChanged)).
		Owns(&corev1.ConfigMap{}, builder.WithPredicates(notCreated)).
		Owns(&appsv1.Deployment{}, builder.WithPredicates(notCreated)).
		Owns(&corev1.Service{}, builder.WithPredicates(notCreated)).
		Owns(&policyv1.PodDisruptionBudget{}, builder.WithPredicates(notCreated)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.gatewaysReferencing)).
		WithOptions(controller.Options{MaxConcurrentReconciles: maxConcurrent}).
		Complete(r)
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
