package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// How the reconciler knows an owned object is as it would apply it, without reading its
// spec: every apply configuration carries AnnotationAppliedConfig, the sha256 of the
// configuration without it, and the apiserver records in the object's managedFields
// the set of fields FieldOwner applied. When the object carries the annotation of
// the configuration the reconciler would apply, and FieldOwner still holds exactly the
// fields that configuration sets, every value FieldOwner set is there: another
// writer that changes one of them takes it over (an update moves the fields it changes
// to its own manager; an apply needs force to do so), which leaves FieldOwner's set
// smaller. So the digest of an owned object (managedSum) is read from its annotation
// and the raw fieldsV1 of FieldOwner's apply entry, with no structured-merge-diff
// conversion of the object, and the reconciler computes the same digest of what it
// would apply (desiredSum) from the field set the apiserver would record for it.

// AnnotationAppliedConfig is set on every object the operator applies: the sha256 of
// its apply configuration (as JSON, without this annotation).
const AnnotationAppliedConfig = "ferrofed.io/applied-config"

// annotatable is an apply configuration of an owned kind.
type annotatable[T any] interface {
	runtime.ApplyConfiguration
	WithAnnotations(map[string]string) T
}

// configDigest is the AnnotationAppliedConfig of ac: the sha256 of ac as JSON.
func configDigest(ac runtime.ApplyConfiguration) (string, error) {
	data, err := json.Marshal(ac)
	if err != nil {
		return "", fmt.Errorf("encode an apply configuration: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// withApplied is ac with AnnotationAppliedConfig set to sum.
func withApplied[T annotatable[T]](ac T, sum string) T {
	return ac.WithAnnotations(map[string]string{AnnotationAppliedConfig: sum})
}

// managedSum is the digest of live as FieldOwner applied it: its
// AnnotationAppliedConfig and the fields FieldOwner's apply entry holds. An object
// without either has the digest of neither, equal to no desiredSum.
func managedSum(live metav1.Object) string {
	var fields []byte
	for _, e := range live.GetManagedFields() {
		if e.Manager == FieldOwner && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
			fields = e.FieldsV1.GetRawBytes()
		}
	}
	return digest(live.GetAnnotations()[AnnotationAppliedConfig], fields)
}

func digest(applied string, fields []byte) string {
	sum := rawDigest(applied, fields)
	return hex.EncodeToString(sum[:])
}

func rawDigest(applied string, fields []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(applied))
	h.Write([]byte{0})
	h.Write(fields)
	return [sha256.Size]byte(h.Sum(nil))
}

// appliedTypes converts apply configurations of the built-in kinds to typed values with
// the schema client-go's apply configurations are generated from. It is made on first
// use: parsing that schema takes tens of milliseconds and megabytes, which every other
// command of the binary (`ferrofed serve`, the `ferrofed healthcheck` of exec probes)
// must not pay at start.
var appliedTypes = sync.OnceValue(func() managedfields.TypeConverter {
	return applyconfigurations.NewTypeConverter(clientgoscheme.Scheme)
})

// strippedFields are the fields the apiserver never records in a manager's set
// (apimachinery's managedfields stripMetaManager).
var strippedFields = fieldpath.NewSet(
	fieldpath.MakePathOrDie("apiVersion"),
	fieldpath.MakePathOrDie("kind"),
	fieldpath.MakePathOrDie("metadata"),
	fieldpath.MakePathOrDie("metadata", "name"),
	fieldpath.MakePathOrDie("metadata", "namespace"),
	fieldpath.MakePathOrDie("metadata", "creationTimestamp"),
	fieldpath.MakePathOrDie("metadata", "selfLink"),
	fieldpath.MakePathOrDie("metadata", "uid"),
	fieldpath.MakePathOrDie("metadata", "clusterName"),
	fieldpath.MakePathOrDie("metadata", "generation"),
	fieldpath.MakePathOrDie("metadata", "managedFields"),
	fieldpath.MakePathOrDie("metadata", "resourceVersion"),
)

// desiredSum is the managedSum an object has once desired (stamped) is applied to it:
// its annotation, and the field set the apiserver records for an apply, computed as
// the apiserver computes it (the configuration read as YAML into an unstructured
// object, converted to a typed value, its field set without strippedFields).
//
// Every reconcile asks it of every owned object, and mostly of the same
// configurations (a pod's event, a poll's summary, a status change reconcile a
// Gateway whose objects did not change), so the sums are remembered by the digest of
// the configuration's JSON: what is remembered can never be stale, and the typed
// conversion (most of a reconcile's allocations) runs once per configuration.
func desiredSum(desired runtime.ApplyConfiguration) (string, error) {
	data, err := json.Marshal(desired)
	if err != nil {
		return "", fmt.Errorf("encode an apply configuration: %w", err)
	}
	key := sha256.Sum256(data)
	if sum, ok := desiredSums.get(key); ok {
		return hex.EncodeToString(sum[:]), nil
	}
	fields, applied, err := fieldsOf(data)
	if err != nil {
		return "", err
	}
	sum := rawDigest(applied, fields)
	desiredSums.getOrPut(key, sum)
	return hex.EncodeToString(sum[:]), nil
}

// maxDesiredSums bounds the remembered sums (a few per Gateway); when full they are
// all forgotten, and the next reconciles compute them again.
const maxDesiredSums = 1 << 14

// desiredSums maps the digest of an apply configuration's JSON to its desiredSum, raw.
var desiredSums = boundedMap[[sha256.Size]byte, [sha256.Size]byte]{max: maxDesiredSums}

// appliedFields is the fieldsV1 the apiserver records for FieldOwner when desired is
// applied, and desired's AnnotationAppliedConfig.
func appliedFields(desired runtime.ApplyConfiguration) ([]byte, string, error) {
	data, err := json.Marshal(desired)
	if err != nil {
		return nil, "", fmt.Errorf("encode an apply configuration: %w", err)
	}
	return fieldsOf(data)
}

// fieldsOf is appliedFields of an apply configuration's JSON.
func fieldsOf(data []byte) ([]byte, string, error) {
	// JSON straight into unstructured (whole numbers as int64, as the typed converter
	// wants them); a detour through YAML cost a third of the operator's allocations.
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, "", fmt.Errorf("read an apply configuration: %w", err)
	}
	tv, err := appliedTypes().ObjectToTyped(u, typed.AllowDuplicates)
	if err != nil {
		return nil, "", fmt.Errorf("type the apply configuration of %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	set, err := tv.ToFieldSet()
	if err != nil {
		return nil, "", fmt.Errorf("the fields of %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	fields, err := set.Difference(strippedFields).ToJSON()
	if err != nil {
		return nil, "", fmt.Errorf("the fields of %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return fields, u.GetAnnotations()[AnnotationAppliedConfig], nil
}

// sameAsLive reports whether live holds what applying desired would make it hold: the
// same applied configuration, with FieldOwner's fields all its own. A cached owned
// object holds only its managedSum (cachedSum, see trimForCache).
func sameAsLive(live client.Object, desired runtime.ApplyConfiguration) (bool, error) {
	have, cached := cachedSum(live)
	if !cached {
		have = managedSum(live)
	}
	want, err := desiredSum(desired)
	return err == nil && have == want, err
}

// replicasHeld reports whether a manager other than FieldOwner's apply holds live's
// spec.replicas: the HorizontalPodAutoscaler (through /scale), ReplicasOwner, anyone
// who scaled it. Read from the cache's annotation, or from live's managedFields.
func replicasHeld(live client.Object) bool {
	if IsTrimmedForCache(live) {
		return strings.HasSuffix(live.GetGenerateName(), replicasHeldMark)
	}
	return replicasHeldBy(live.GetManagedFields())
}

// replicasHeldBy reports whether an entry of managed, other than FieldOwner's apply of
// the object itself, holds f:spec.f:replicas.
func replicasHeldBy(managed []metav1.ManagedFieldsEntry) bool {
	for _, e := range managed {
		if e.Manager == FieldOwner && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
			continue
		}
		var fields struct {
			Spec map[string]json.RawMessage `json:"f:spec"`
		}
		if e.FieldsV1 != nil && json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields) == nil {
			if _, ok := fields.Spec["f:replicas"]; ok {
				return true
			}
		}
	}
	return false
}
