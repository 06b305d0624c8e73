package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

// storedQueryGatewayIndex indexes StoredQueries by the Gateway they name.
const storedQueryGatewayIndex = "spec.gatewayName"

// MaxStoredQueriesBytes bounds what one Gateway's stored-query ConfigMap holds: a
// ConfigMap is at most 1 MiB, and its keys and metadata count too.
const MaxStoredQueriesBytes = 900 << 10

// StoredQueryReconciler renders the StoredQuery resources of each Gateway into the
// ConfigMap <gateway>-stored-queries (one key <id>.json per stored query), which the
// Gateway's pods mount as their stored-query store (stored_queries.dir), and makes
// each StoredQuery owned by the Gateway it names. Its requests are Gateways: a
// StoredQuery's change reconciles the Gateway it names.
type StoredQueryReconciler struct {
	client.Client
	// Metadata reads ConfigMaps' metadata: the manager's cache, which holds the
	// metadata of every ConfigMap (the Gateway controller watches them so).
	Metadata client.Reader
}

// +kubebuilder:rbac:groups=ferrofed.io,resources=storedqueries,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=ferrofed.io,resources=storedqueries/status,verbs=get;patch

// Reconcile applies the Gateway's stored-query ConfigMap from the StoredQueries that
// name it. Without any, the ConfigMap is emptied if it exists and not made otherwise.
func (r *StoredQueryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	list := &ferrofedv1alpha1.StoredQueryList{}
	if err := r.List(ctx, list, client.InNamespace(req.Namespace), client.MatchingFields{storedQueryGatewayIndex: req.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list the StoredQueries of Gateway %s: %w", req.Name, err)
	}
	gw := &ferrofedv1alpha1.Gateway{}
	if err := r.Get(ctx, req.NamespacedName, gw); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		// Its ConfigMap went with it; StoredQueries it owned too, and any left name a
		// Gateway that is not there.
		return ctrl.Result{}, r.setRendered(ctx, list.Items, false, nil)
	}
	if !gw.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	for i := range list.Items {
		if err := r.own(ctx, gw, &list.Items[i]); err != nil {
			return ctrl.Result{}, err
		}
	}
	if len(list.Items) == 0 {
		cm := &metav1.PartialObjectMetadata{}
		cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		// No StoredQuery: the ConfigMap is emptied if there is one. Asked of the cache, a
		// ConfigMap made a moment ago may not be there yet; its creation then brings
		// this Gateway back (SetupWithManager).
		err := r.Metadata.Get(ctx, types.NamespacedName{Namespace: gw.Namespace, Name: gatewayspec.StoredQueriesConfigMapName(gw.Name)}, cm)
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("get the stored-query ConfigMap of Gateway %s: %w", gw.Name, err)
		}
	}
	desired, left := StoredQueriesConfigMap(gw, list.Items)
	reasons := map[string]string{}
	for _, l := range left {
		log.FromContext(ctx).Info("Left a StoredQuery out of the stored-query ConfigMap", "storedQuery", l.Name, "reason", l.Reason)
		reasons[l.Name] = l.Reason
	}
	if err := r.Apply(ctx, desired, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return ctrl.Result{}, fmt.Errorf("apply ConfigMap %s: %w", gatewayspec.StoredQueriesConfigMapName(gw.Name), err)
	}
	return ctrl.Result{}, r.setRendered(ctx, list.Items, true, reasons)
}

// setRendered patches the Rendered condition of each StoredQuery whose condition
// changed (one status patch each; none when nothing changed).
func (r *StoredQueryReconciler) setRendered(ctx context.Context, sqs []ferrofedv1alpha1.StoredQuery, gatewayFound bool, leftOut map[string]string) error {
	for i := range sqs {
		sq := &sqs[i]
		orig := sq.DeepCopy()
		if sq.Status == nil {
			sq.Status = &ferrofedv1alpha1.StoredQueryStatus{}
		}
		if !meta.SetStatusCondition(&sq.Status.Conditions, renderedCondition(sq, gatewayFound, leftOut[sq.Name])) {
			continue
		}
		if err := r.Status().Patch(ctx, sq, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("patch the status of StoredQuery %s: %w", sq.Name, err)
		}
	}
	return nil
}

// renderedCondition is a StoredQuery's Rendered condition: whether its Gateway exists,
// and why it was left out of the Gateway's ConfigMap ("" when it was not).
func renderedCondition(sq *ferrofedv1alpha1.StoredQuery, gatewayFound bool, leftOut string) metav1.Condition {
	c := metav1.Condition{Type: ferrofedv1alpha1.ConditionRendered, ObservedGeneration: sq.Generation}
	switch {
	case !gatewayFound:
		c.Status, c.Reason = metav1.ConditionFalse, ferrofedv1alpha1.ReasonGatewayNotFound
		c.Message = fmt.Sprintf("spec.gatewayName: no Gateway %q in namespace %s", sq.Spec.GatewayName, sq.Namespace)
	case leftOut != "":
		c.Status, c.Reason = metav1.ConditionFalse, ferrofedv1alpha1.ReasonStoredQueryLeftOut
		c.Message = leftOut
	default:
		c.Status, c.Reason = metav1.ConditionTrue, ferrofedv1alpha1.ReasonRendered
		c.Message = "a key of ConfigMap " + gatewayspec.StoredQueriesConfigMapName(sq.Spec.GatewayName)
	}
	return c
}

// own makes gw an owner of sq (not its controller: the StoredQuery is the user's), so
// that the garbage collector deletes it with the Gateway.
func (r *StoredQueryReconciler) own(ctx context.Context, gw *ferrofedv1alpha1.Gateway, sq *ferrofedv1alpha1.StoredQuery) error {
	if slices.ContainsFunc(sq.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == gw.UID }) {
		return nil
	}
	patch := client.MergeFromWithOptions(sq.DeepCopy(), client.MergeFromWithOptimisticLock{})
	sq.OwnerReferences = append(sq.OwnerReferences, metav1.OwnerReference{
		APIVersion: ferrofedv1alpha1.GroupVersion.String(), Kind: "Gateway", Name: gw.Name, UID: gw.UID,
	})
	if err := r.Patch(ctx, sq, patch); err != nil {
		return fmt.Errorf("make Gateway %s the owner of StoredQuery %s: %w", gw.Name, sq.Name, err)
	}
	return nil
}

// LeftOut is a StoredQuery the ConfigMap does not hold, and why.
type LeftOut struct {
	Name   string
	Reason string
}

// definitionID is what a stored query's file is named after: the definition's id (a
// FHIR id not starting with a dot, as the gateway's store and a ConfigMap key want),
// read here; the gateway checks the rest of the definition itself.
var definitionID = regexp.MustCompile(`^[A-Za-z0-9\-][A-Za-z0-9\-.]{0,63}$`)

// StoredQueriesConfigMap is the ConfigMap of gw's stored queries: one key <id>.json per
// StoredQuery holding its spec.definition, in the order of their names. A StoredQuery
// whose definition has no usable id, whose id another (earlier by name) has, or that
// would take the ConfigMap past MaxStoredQueriesBytes is left out. Pure: the same
// StoredQueries give the same ConfigMap.
func StoredQueriesConfigMap(gw *ferrofedv1alpha1.Gateway, sqs []ferrofedv1alpha1.StoredQuery) (*corev1ac.ConfigMapApplyConfiguration, []LeftOut) {
	sorted := slices.Clone(sqs)
	slices.SortFunc(sorted, func(a, b ferrofedv1alpha1.StoredQuery) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	data := map[string]string{}
	var left []LeftOut
	size := 0
	for _, sq := range sorted {
		var d struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(sq.Spec.Definition), &d); err != nil || !definitionID.MatchString(d.ID) {
			left = append(left, LeftOut{sq.Name, "spec.definition is not a JSON object with a FHIR id"})
			continue
		}
		key := d.ID + ".json"
		if _, dup := data[key]; dup {
			left = append(left, LeftOut{sq.Name, fmt.Sprintf("another StoredQuery of the Gateway has the id %q", d.ID)})
			continue
		}
		if size+len(key)+len(sq.Spec.Definition) > MaxStoredQueriesBytes {
			left = append(left, LeftOut{sq.Name, fmt.Sprintf("the Gateway's stored queries would pass %d bytes", MaxStoredQueriesBytes)})
			continue
		}
		size += len(key) + len(sq.Spec.Definition)
		data[key] = sq.Spec.Definition
	}
	return corev1ac.ConfigMap(gatewayspec.StoredQueriesConfigMapName(gw.Name), gw.Namespace).
		WithLabels(Labels(gw)).
		WithOwnerReferences(ownerReference(gw)).
		WithData(data), left
}

// SetupWithManager registers the controller: Gateways (their creation included, so that
// StoredQueries applied first are rendered) and StoredQueries, each mapped to the
// Gateway it names.
func (r *StoredQueryReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &ferrofedv1alpha1.StoredQuery{}, storedQueryGatewayIndex,
		func(o client.Object) []string { return []string{o.(*ferrofedv1alpha1.StoredQuery).Spec.GatewayName} }); err != nil {
		return fmt.Errorf("index StoredQueries by Gateway: %w", err)
	}
	toGateway := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		sq := o.(*ferrofedv1alpha1.StoredQuery)
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: sq.Namespace, Name: sq.Spec.GatewayName}}}
	})
	// A Gateway's stored-query ConfigMap, seen (as metadata) created, changed or
	// deleted, brings its Gateway back: level-triggered, so that a reconcile that
	// asked the cache before the ConfigMap was in it is followed by one that sees it.
	ofGateway := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		owner := metav1.GetControllerOf(o)
		if owner == nil || owner.Kind != "Gateway" || o.GetName() != gatewayspec.StoredQueriesConfigMapName(owner.Name) {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: owner.Name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("storedquery").
		For(&ferrofedv1alpha1.Gateway{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&ferrofedv1alpha1.StoredQuery{}, toGateway).
		Watches(&corev1.ConfigMap{}, ofGateway, builder.OnlyMetadata).
		Complete(r)
}
