package controllers

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cachedOwned is what the operator's cache keeps of an owned Deployment, Service or
// PodDisruptionBudget once trimOwned cut it to its metadata (and a Deployment's
// spec.replicas and status counters): 320 bytes, where an empty Deployment is 1,232 and
// an empty Service 592 (docs/operator.md, "The operator's memory"). The reconciler reads
// them through cachedReads, which expands one into its kind.
type cachedOwned struct {
	metav1.ObjectMeta
	// replicas is a Deployment's spec.replicas.
	replicas *int32
	// status is a Deployment's status without its conditions.
	status appsv1.DeploymentStatus
}

func (c *cachedOwned) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies c with its metadata and pointers.
func (c *cachedOwned) DeepCopyObject() runtime.Object {
	out := &cachedOwned{replicas: c.replicas}
	c.DeepCopyInto(&out.ObjectMeta)
	if c.replicas != nil {
		r := *c.replicas
		out.replicas = &r
	}
	c.status.DeepCopyInto(&out.status)
	return out
}

// into expands c into obj, a Deployment, Service or PodDisruptionBudget, as the
// client's read of the trimmed cache would have it: nothing shared with c.
func (c *cachedOwned) into(obj client.Object) bool {
	cp := c.DeepCopyObject().(*cachedOwned)
	switch o := obj.(type) {
	case *appsv1.Deployment:
		*o = appsv1.Deployment{ObjectMeta: cp.ObjectMeta, Spec: appsv1.DeploymentSpec{Replicas: cp.replicas}, Status: cp.status}
	case *corev1.Service:
		*o = corev1.Service{ObjectMeta: cp.ObjectMeta}
	case *policyv1.PodDisruptionBudget:
		*o = policyv1.PodDisruptionBudget{ObjectMeta: cp.ObjectMeta}
	default:
		return false
	}
	return true
}

// compactOwned is what the cache keeps of o, an owned object trimOwned has cut.
func compactOwned(o client.Object) *cachedOwned {
	c := &cachedOwned{}
	if m, ok := o.(metav1.ObjectMetaAccessor); ok {
		c.ObjectMeta = *m.GetObjectMeta().(*metav1.ObjectMeta)
	}
	if d, ok := o.(*appsv1.Deployment); ok {
		c.replicas, c.status = d.Spec.Replicas, d.Status
		c.status.Conditions = nil
	}
	return c
}

// compactStores are the stores of the informers of the kinds the cache keeps as
// cachedOwned.
type compactStores struct {
	deployments, services, budgets toolscache.Store
}

// get reads key into obj from its store when obj is of a kind the cache keeps
// compact; it reports false for another kind, or an object the cache did not compact.
func (s compactStores) get(key client.ObjectKey, obj client.Object) (bool, error) {
	var store toolscache.Store
	var resource schema.GroupResource
	switch obj.(type) {
	case *appsv1.Deployment:
		store, resource = s.deployments, appsv1.Resource("deployments")
	case *corev1.Service:
		store, resource = s.services, corev1.Resource("services")
	case *policyv1.PodDisruptionBudget:
		store, resource = s.budgets, policyv1.Resource("poddisruptionbudgets")
	}
	if store == nil {
		return false, nil
	}
	item, exists, err := store.GetByKey(key.String())
	if err != nil {
		return true, err
	}
	if !exists {
		return true, apierrors.NewNotFound(resource, key.Name)
	}
	cached, ok := item.(*cachedOwned)
	return ok && cached.into(obj), nil
}

// storesOf finds the compact kinds' stores in informers.
func storesOf(ctx context.Context, informers cache.Informers) (compactStores, error) {
	var s compactStores
	for obj, store := range map[client.Object]*toolscache.Store{&appsv1.Deployment{}: &s.deployments, &corev1.Service{}: &s.services,
		&policyv1.PodDisruptionBudget{}: &s.budgets} {
		var err error
		if *store, err = storeOf(ctx, informers, obj); err != nil {
			return s, err
		}
	}
	return s, nil
}

// cachedReads is the reconciler's client: Deployments, Services and
// PodDisruptionBudgets are read from the stores of their informers, which hold them
// as cachedOwned (the cache's own Get would refuse the type); everything else goes to
// Client.
type cachedReads struct {
	client.Client
	compactStores
}

func (c cachedReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if done, err := c.get(key, obj); done {
		return err
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// cachedReader is CachedReader's.
type cachedReader struct {
	client.Reader
	compactStores
}

func (c cachedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if done, err := c.get(key, obj); done {
		return err
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

// CachedReader reads c, the operator's cache, as its reconciler does: the owned
// Deployments, Services and PodDisruptionBudgets expanded from what the cache keeps of
// them (cachedOwned), everything else from c.
func CachedReader(ctx context.Context, c cache.Cache) (client.Reader, error) {
	s, err := storesOf(ctx, c)
	if err != nil {
		return nil, err
	}
	return cachedReader{Reader: c, compactStores: s}, nil
}
