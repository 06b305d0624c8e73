package controllers

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

// statefulSetRefusalV137 is the status kube-apiserver v1.37.2 answers an apply that
// changes a StatefulSet's volumeClaimTemplates with (from an envtest run; the value is
// cut short).
const statefulSetRefusalV137 = `{"metadata":{},"status":"Failure",
 "message":"StatefulSet.apps \"x\" is invalid: spec.volumeClaimTemplates: Invalid value: [{\"name\":\"spool\"}]: field is immutable",
 "reason":"Invalid","details":{"name":"x","group":"apps","kind":"StatefulSet","causes":[{"reason":"FieldValueInvalid",
 "message":"Invalid value: [{\"name\":\"spool\",\"Spec\":{\"AccessModes\":[\"ReadWriteOnce\"]}}]: field is immutable","field":"spec.volumeClaimTemplates"}]},"code":422}`

func invalid(kind string, errs ...*field.Error) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: kind}, "edge", field.ErrorList(errs))
}

// olderRefusal is the one cause kube-apiservers before the per-field immutability
// checks gave for any immutable StatefulSet field.
var olderRefusal = field.Forbidden(field.NewPath("spec"),
	"updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden")

func TestImmutableStatefulSetFields(t *testing.T) {
	var real metav1.Status
	if err := json.Unmarshal([]byte(statefulSetRefusalV137), &real); err != nil {
		t.Fatal(err)
	}
	vct := field.NewPath("spec", "volumeClaimTemplates")
	cases := []struct {
		name string
		err  error
		want []string // nil: not a refusal of immutable fields
	}{
		{"kube-apiserver v1.37's answer, as an envtest run gave it", &apierrors.StatusError{ErrStatus: real}, []string{"spec.volumeClaimTemplates"}},
		{"the handwritten immutability check", invalid("StatefulSet", field.Invalid(vct, "[...]", "field is immutable")), []string{"spec.volumeClaimTemplates"}},
		{"declarative validation's immutable", invalid("StatefulSet", field.Invalid(vct, nil, "field is immutable").WithOrigin("immutable")), []string{"spec.volumeClaimTemplates"}},
		{"two immutable fields", invalid("StatefulSet", field.Invalid(vct, nil, "field is immutable"), field.Invalid(field.NewPath("spec", "serviceName"), "b", "field is immutable")),
			[]string{"spec.volumeClaimTemplates", "spec.serviceName"}},
		{"an older apiserver's one cause on spec", invalid("StatefulSet", olderRefusal), []string{"spec"}},
		{"wrapped", fmt.Errorf("apply StatefulSet edge: %w", invalid("StatefulSet", olderRefusal)), []string{"spec"}},
		{"an immutable field and a value invalid in itself", invalid("StatefulSet", field.Invalid(vct, nil, "field is immutable"),
			field.Invalid(field.NewPath("spec", "replicas"), -1, "must be greater than or equal to 0")), nil},
		{"an invalid pod template", invalid("StatefulSet", field.Required(field.NewPath("spec", "template", "spec", "containers"), "")), nil},
		{"another Forbidden on spec", invalid("StatefulSet", field.Forbidden(field.NewPath("spec"), "something else")), nil},
		{"an immutable metadata field", invalid("StatefulSet", field.Invalid(field.NewPath("metadata", "name"), "b", "field is immutable")), nil},
		{"a Deployment's immutable selector", invalid("Deployment", field.Invalid(field.NewPath("spec", "selector"), nil, "field is immutable")), nil},
		{"Invalid with no causes", apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "StatefulSet"}, "edge", nil), nil},
		{"a conflict", apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "edge", errors.New("changed")), nil},
		{"RBAC", apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "edge", errors.New("no")), nil},
		{"not an API error", errors.New("connection refused"), nil},
		{"nil", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fields, ok := immutableStatefulSetFields(tc.err)
			if ok != (tc.want != nil) || !slices.Equal(fields, tc.want) {
				t.Errorf("immutableStatefulSetFields = %v, %t; want %v, %t", fields, ok, tc.want, tc.want != nil)
			}
		})
	}
}

// persistentStatefulSet is the typed StatefulSet of a Gateway with a persistent spool of
// storage, after mutate.
func persistentStatefulSet(t *testing.T, storage string, mutate func(*ferrofedv1alpha1.SpoolVolumeClaimTemplate)) *appsv1.StatefulSet {
	t.Helper()
	gw := gateway(func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Replicas = ptr.To[int32](2)
		tmpl := &ferrofedv1alpha1.SpoolVolumeClaimTemplate{Spec: &corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(storage)}},
		}}
		if mutate != nil {
			mutate(tmpl)
		}
		g.Spec.Audit = &ferrofedv1alpha1.Audit{Spool: &ferrofedv1alpha1.AuditSpool{VolumeClaimTemplate: tmpl}}
	})
	return typedStatefulSet(StatefulSet(gw, gatewayspec.Plan(&gw.Spec), []byte("rendered")))
}

func TestRecreateChanges(t *testing.T) {
	refused := invalid("StatefulSet", field.Invalid(field.NewPath("spec", "volumeClaimTemplates"), nil, "field is immutable"))
	live := persistentStatefulSet(t, "1Gi", nil)
	// As the apiserver keeps it: volumeMode defaulted.
	live.Spec.VolumeClaimTemplates[0].Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
	cases := []struct {
		name    string
		refused error
		desired *appsv1.StatefulSet
		want    []string // nil: no re-create
	}{
		{"a larger storage request", refused, persistentStatefulSet(t, "2Gi", nil), []string{"storage request 1Gi to 2Gi"}},
		{"another class", refused, persistentStatefulSet(t, "1Gi", func(s *ferrofedv1alpha1.SpoolVolumeClaimTemplate) { s.Spec.StorageClassName = ptr.To("fast") }),
			[]string{"storageClassName (the default class) to fast"}},
		{"labels and a larger request", refused, persistentStatefulSet(t, "4Gi", func(s *ferrofedv1alpha1.SpoolVolumeClaimTemplate) {
			s.Metadata = &ferrofedv1alpha1.SpoolClaimMetadata{Labels: map[string]string{"team": "audit"}}
		}), []string{"storage request 1Gi to 4Gi", "the claims' labels"}},
		{"ReadWriteOncePod", refused, persistentStatefulSet(t, "1Gi", func(s *ferrofedv1alpha1.SpoolVolumeClaimTemplate) {
			s.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
		}), []string{"accessModes [ReadWriteOnce] to [ReadWriteOncePod]"}},
		{"nothing the operator names (a defaulted field is no change)", refused, persistentStatefulSet(t, "1Gi", nil), []string{"the volumeClaimTemplate"}},
		{"an older apiserver's refusal", invalid("StatefulSet", olderRefusal), persistentStatefulSet(t, "2Gi", nil), []string{"storage request 1Gi to 2Gi"}},
		{"another selector: the new StatefulSet would not adopt the pods", refused, func() *appsv1.StatefulSet {
			s := persistentStatefulSet(t, "2Gi", nil)
			s.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
			return s
		}(), nil},
		{"a refusal of something else", invalid("StatefulSet", field.Required(field.NewPath("spec", "template"), "")), persistentStatefulSet(t, "2Gi", nil), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := recreateChanges(tc.refused, live, tc.desired)
			if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
				t.Errorf("recreateChanges = %q, %t; want %q, %t", got, ok, tc.want, tc.want != nil)
			}
		})
	}
}

// TestStatefulSetGoingTellsTheClaims: while the StatefulSet is being deleted with
// Orphan, Ready's message names the change, that the pods keep running and that the
// existing claims keep their size; any other deletion is only waited for.
func TestStatefulSetGoingTellsTheClaims(t *testing.T) {
	gw := gateway(nil)
	live := persistentStatefulSet(t, "1Gi", nil)
	live.DeletionTimestamp = ptr.To(metav1.Now())
	live.Finalizers = []string{metav1.FinalizerOrphanDependents}
	p := statefulSetGoing(gw, live, persistentStatefulSet(t, "2Gi", nil))
	if p.reason != ferrofedv1alpha1.ReasonStatefulSetRecreating {
		t.Errorf("reason %s", p.reason)
	}
	for _, w := range []string{"storage request 1Gi to 2Gi", "propagationPolicy Orphan", "pods keep running", "spool-edge-<n>", "keep their size", "volume expansion"} {
		if !strings.Contains(p.message, w) {
			t.Errorf("message %q does not say %q", p.message, w)
		}
	}
	live.Finalizers = []string{metav1.FinalizerDeleteDependents}
	if p := statefulSetGoing(gw, live, live); p.reason != ferrofedv1alpha1.ReasonStatefulSetRecreating || strings.Contains(p.message, "Orphan") {
		t.Errorf("a Foreground deletion: %+v", p)
	}
	if !orphaning(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: live.DeletionTimestamp, Finalizers: []string{"orphan"}}}) ||
		orphaning(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Finalizers: []string{"orphan"}}}) {
		t.Error("orphaning: an Orphan delete is a deletionTimestamp and the orphan finalizer")
	}
}
