package v1alpha1

import (
	"bytes"

	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// BenchmarkWebhookCreate is the validating webhook's own cost for one create, as the
// operator's webhook server runs it (the AdmissionReview decoded, the Gateway checked,
// its configuration rendered and checked, the answer encoded): the CPU time behind the
// webhook's latency when 50 creates arrive at once (test/operator/process).
func BenchmarkWebhookCreate(b *testing.B) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	wh := admission.WithValidator[*Gateway](scheme, GatewayValidator{})
	wh.LogConstructor = func(base logr.Logger, _ *admission.Request) logr.Logger { return base }
	body := admissionReview(b, 7)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/validate-ferrofed-io-v1alpha1-gateway", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		wh.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"allowed":true`)) {
			b.Fatalf("%d %s", rec.Code, rec.Body.String())
		}
	}
}

// admissionReview is the apiserver's review of a create of the benchmark's i-th
// Gateway (test/operator/process), defaults applied as the CRD applies them.
func admissionReview(b *testing.B, i int) []byte {
	gw := &Gateway{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "Gateway"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("gw-%04d", i)},
		Spec: GatewaySpec{
			Image:    "ghcr.io/ferrofed/ferrofed:bench",
			Replicas: ptr.To[int32](int32(1 + i%2)),
			BasePath: "/",
			Port:     8080,
			Config: &GatewayConfig{Inline: ptr.To(fmt.Sprintf(
				"[[registry.members]]\nid = \"node-%d\"\nquery_endpoint = \"https://node-%d.example.org/fhir\"\n", i, i))},
		},
	}
	raw, err := json.Marshal(gw)
	if err != nil {
		b.Fatal(err)
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "b1e2",
			Kind:      metav1.GroupVersionKind{Group: GroupVersion.Group, Version: GroupVersion.Version, Kind: "Gateway"},
			Resource:  metav1.GroupVersionResource{Group: GroupVersion.Group, Version: GroupVersion.Version, Resource: "gateways"},
			Name:      gw.Name,
			Namespace: gw.Namespace,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
			DryRun:    ptr.To(true),
		},
	}
	data, err := json.Marshal(review)
	if err != nil {
		b.Fatal(err)
	}
	return data
}
