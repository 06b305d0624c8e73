package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
)

// BenchmarkWebhookCreate is the validating webhook's own cost for one create, as the
// operator's webhook server runs it (the AdmissionReview decoded, the Gateway checked,
// its configuration rendered and checked, the answer encoded): the CPU time behind the
// webhook's latency when 50 creates arrive at once (test/operator/process). The
// sub-benchmark controller-runtime is the same validator behind controller-runtime's
// admission.Webhook, the handler the operator served before: the baseline of the
// same run.
func BenchmarkWebhookCreate(b *testing.B) {
	body := admissionReview(b, admissionv1.Create, benchGatewayOf(7), nil)
	for _, h := range []struct {
		name    string
		handler http.Handler
	}{{"ferrofed", GatewayValidator{}}, {"controller-runtime", controllerRuntimeWebhook(b, GatewayValidator{})}} {
		b.Run(h.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec := serve(h.handler, body)
				if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"allowed":true`)) {
					b.Fatalf("%d %s", rec.Code, rec.Body.String())
				}
			}
		})
	}
}

// controllerRuntimeWebhook is v behind controller-runtime's admission.Webhook, panics
// answered as errors: the reference TestHandlerAnswersAsControllerRuntime holds
// GatewayValidator.ServeHTTP to.
func controllerRuntimeWebhook(tb testing.TB, v GatewayValidator) http.Handler {
	scheme := runtime.NewScheme()
	if err := ferrofedv1alpha1.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	wh := admission.WithValidator[*ferrofedv1alpha1.Gateway](scheme, v).WithRecoverPanic(true)
	wh.LogConstructor = func(base logr.Logger, _ *admission.Request) logr.Logger { return base }
	return wh
}

func serve(h http.Handler, body []byte) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, WebhookPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	return rec
}

// benchGatewayOf is the i-th Gateway of the operator's process benchmark
// (test/operator/process), defaults applied as the CRD applies them: one member, and
// the issuer its data plane's tokens are verified with (issuer.RemoteTable).
func benchGatewayOf(i int) *ferrofedv1alpha1.Gateway {
	return &ferrofedv1alpha1.Gateway{
		TypeMeta:   metav1.TypeMeta{APIVersion: ferrofedv1alpha1.GroupVersion.String(), Kind: "Gateway"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("gw-%04d", i)},
		Spec: ferrofedv1alpha1.GatewaySpec{
			Image:    "ghcr.io/ferrofed/ferrofed:bench",
			Replicas: ptr.To[int32](int32(1 + i%2)),
			BasePath: "/",
			Port:     8080,
			Config: &ferrofedv1alpha1.GatewayConfig{Inline: ptr.To(issuer.WithRemote(fmt.Sprintf(
				"[[registry.members]]\nid = \"node-%d\"\nquery_endpoint = \"https://node-%d.example.org/fhir\"\n", i, i)))},
		},
	}
}

// admissionReview is the apiserver's review of op on gw (old: the Gateway before an
// update or a delete), with what the apiserver adds: the creating client's managed
// fields, the user, the options.
func admissionReview(tb testing.TB, op admissionv1.Operation, gw, old *ferrofedv1alpha1.Gateway) []byte {
	raw := func(g *ferrofedv1alpha1.Gateway) runtime.RawExtension {
		if g == nil {
			return runtime.RawExtension{}
		}
		g = g.DeepCopy()
		g.UID = "6f1c2a9e-0c41-4d53-9d8e-1f2a3b4c5d6e"
		g.CreationTimestamp = metav1.NewTime(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC))
		g.ManagedFields = []metav1.ManagedFieldsEntry{{
			Manager: "process.test", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: ferrofedv1alpha1.GroupVersion.String(),
			Time: &g.CreationTimestamp, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{".":{},"f:config":{".":{},"f:inline":{}},"f:image":{},"f:replicas":{}}}`),
		}}
		data, err := json.Marshal(g)
		if err != nil {
			tb.Fatal(err)
		}
		return runtime.RawExtension{Raw: data}
	}
	name := ""
	if gw != nil {
		name = gw.Name
	} else if old != nil {
		name = old.Name
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "b1e2c3d4-0000-4000-8000-000000000001",
			Kind:      metav1.GroupVersionKind{Group: ferrofedv1alpha1.GroupVersion.Group, Version: ferrofedv1alpha1.GroupVersion.Version, Kind: "Gateway"},
			Resource:  metav1.GroupVersionResource{Group: ferrofedv1alpha1.GroupVersion.Group, Version: ferrofedv1alpha1.GroupVersion.Version, Resource: "gateways"},
			Name:      name,
			Namespace: "bench",
			Operation: op,
			UserInfo:  authenticationv1.UserInfo{Username: "system:admin", Groups: []string{"system:masters", "system:authenticated"}},
			Object:    raw(gw),
			OldObject: raw(old),
			DryRun:    ptr.To(true),
			Options:   runtime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1","dryRun":["All"]}`)},
		},
	}
	data, err := json.Marshal(review)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// answer is the response of a handler's AdmissionReview, with the review's own
// apiVersion and kind.
func answer(t *testing.T, rec *httptest.ResponseRecorder) admissionv1.AdmissionReview {
	t.Helper()
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", rec.Code, rec.Body.String())
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("not an AdmissionReview with a response (%v): %s", err, rec.Body.String())
	}
	return out
}

// TestHandlerAnswersAsControllerRuntime: the operator's own handler gives the
// apiserver the answer controller-runtime's admission.Webhook gives with the same
// validator (the handler the operator served before), for every outcome: allowed,
// allowed with warnings, refused with field causes, refused by the image allow-list,
// an update, a delete.
func TestHandlerAnswersAsControllerRuntime(t *testing.T) {
	withWarning := benchGatewayOf(1)
	withWarning.Spec.Lifecycle.DrainDelay = &metav1.Duration{}
	ownedKey := benchGatewayOf(2)
	ownedKey.Spec.Config.Inline = ptr.To(issuer.WithRemote("[server]\nbase_path = \"/x\"\nlisten = \":9\"\n"))
	notTOML := benchGatewayOf(3)
	notTOML.Spec.Config.Inline = ptr.To("[[registry.members]\n")
	bothConfigs := benchGatewayOf(4)
	bothConfigs.Spec.Config.ConfigMapRef = &ferrofedv1alpha1.ConfigMapKeyRef{Name: "cm"}
	allowList := GatewayValidator{AllowedImages: []string{"registry.example.org/ferrofed/*"}}
	noIssuer, open := benchGatewayOf(11), benchGatewayOf(12)
	noIssuer.Spec.Config.Inline = ptr.To("[[registry.members]]\nid = \"node-11\"\nquery_endpoint = \"https://node-11.example.org/fhir\"\n")
	open.Spec.Config.Inline = ptr.To(*noIssuer.Spec.Config.Inline + "[auth]\ndata_plane = \"open\"\n")
	// A Gateway being deleted, its hand-over finalizer removed by the operator, whose
	// spec a stricter rule (here the allow-list) would now refuse.
	deleting := benchGatewayOf(9)
	deleting.DeletionTimestamp, deleting.Finalizers = &metav1.Time{Time: time.Unix(1700000000, 0)}, []string{"ferrofed.io/audit-handover"}
	oversize := benchGatewayOf(8)
	oversize.Spec.Config.Inline = ptr.To(*oversize.Spec.Config.Inline + "# " + strings.Repeat("x", ferrofedv1alpha1.MaxInlineConfigBytes) + "\n")
	tests := []struct {
		name    string
		v       GatewayValidator
		op      admissionv1.Operation
		gw, old *ferrofedv1alpha1.Gateway
		allowed bool
	}{
		{"a valid create", GatewayValidator{}, admissionv1.Create, benchGatewayOf(0), nil, true},
		{"a create with a lifecycle warning", GatewayValidator{}, admissionv1.Create, withWarning, nil, true},
		{"a create with no issuer for its data plane", GatewayValidator{}, admissionv1.Create, noIssuer, nil, false},
		{"a create with an open data plane, warned about", GatewayValidator{}, admissionv1.Create, open, nil, true},
		{"a create setting keys the spec owns", GatewayValidator{}, admissionv1.Create, ownedKey, nil, false},
		{"a create whose inline configuration is not TOML", GatewayValidator{}, admissionv1.Create, notTOML, nil, false},
		{"a create with inline and configMapRef", GatewayValidator{}, admissionv1.Create, bothConfigs, nil, false},
		{"a create of an image off the allow-list", allowList, admissionv1.Create, benchGatewayOf(5), nil, false},
		{"a valid update", GatewayValidator{}, admissionv1.Update, benchGatewayOf(6), benchGatewayOf(6), true},
		{"an update to keys the spec owns", GatewayValidator{}, admissionv1.Update, ownedKey, benchGatewayOf(2), false},
		{"a delete", GatewayValidator{}, admissionv1.Delete, nil, benchGatewayOf(7), true},
		{"an update of a Gateway being deleted, off the allow-list", allowList, admissionv1.Update, deleting, benchGatewayOf(9), true},
		{"the same Gateway, not being deleted", allowList, admissionv1.Update, benchGatewayOf(9), benchGatewayOf(9), false},
		{"a create whose inline configuration is over its bytes", GatewayValidator{}, admissionv1.Create, oversize, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := admissionReview(t, tc.op, tc.gw, tc.old)
			got := answer(t, serve(tc.v, body))
			want := answer(t, serve(controllerRuntimeWebhook(t, tc.v), body))
			if got.APIVersion != "admission.k8s.io/v1" || got.Kind != "AdmissionReview" {
				t.Errorf("answered as %s %s, want admission.k8s.io/v1 AdmissionReview", got.APIVersion, got.Kind)
			}
			if got.Response.Allowed != tc.allowed {
				t.Errorf("allowed = %t, want %t: %+v", got.Response.Allowed, tc.allowed, got.Response.Result)
			}
			if !reflect.DeepEqual(got.Response, want.Response) {
				g, _ := json.Marshal(got.Response)
				w, _ := json.Marshal(want.Response)
				t.Errorf("response differs from controller-runtime's:\n got %s\nwant %s", g, w)
			}
		})
	}
}

// TestTheWebhookGuardsTheDataPlane: a Gateway whose data plane would ask for tokens
// with no issuer to verify them is refused, its cause on spec.config.inline naming
// auth.data_plane; one whose data plane is open, written out, is allowed with the
// gateway's own warning as an admission warning (docs/operator.md, "The data plane's
// issuer").
func TestTheWebhookGuardsTheDataPlane(t *testing.T) {
	members := "[[registry.members]]\nid = \"a\"\nquery_endpoint = \"https://a.example.org/fhir\"\n"
	for _, tc := range []struct {
		name, inline string
		allowed      bool
		want         string // in the one cause of a refusal, or in a warning
	}{
		{"no issuer", members, false, `auth.data_plane: is "required" (the default) but no [[auth.issuers]] is configured`},
		{"an open data plane", members + "[auth]\ndata_plane = \"open\"\n", true,
			`spec.config: auth.data_plane: is "open": anyone who can reach the gateway can search every member for every patient, with no token`},
		{"an issuer", issuer.WithRemote(members), true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := benchGatewayOf(13)
			gw.Spec.Config.Inline = ptr.To(tc.inline)
			r := answer(t, serve(GatewayValidator{}, admissionReview(t, admissionv1.Create, gw, nil))).Response
			if r.Allowed != tc.allowed {
				t.Fatalf("allowed = %t, want %t: %+v", r.Allowed, tc.allowed, r.Result)
			}
			if !tc.allowed {
				if r.Result == nil || r.Result.Details == nil || len(r.Result.Details.Causes) != 1 {
					t.Fatalf("answer %+v, want one cause", r.Result)
				}
				if c := r.Result.Details.Causes[0]; c.Field != "spec.config.inline" || !strings.Contains(c.Message, tc.want) || !strings.Contains(c.Message, "auth.issuers") {
					t.Fatalf("cause %+v, want spec.config.inline with %q and auth.issuers", c, tc.want)
				}
				return
			}
			if (tc.want == "" && len(r.Warnings) != 0) || (tc.want != "" && !slices.Contains(r.Warnings, tc.want)) {
				t.Fatalf("warnings %q, want %q", r.Warnings, tc.want)
			}
		})
	}
}

// TestHandlerRefusesWhatIsNotAReview: a request the handler cannot read is answered
// allowed=false with code 400 and a message naming what is wrong, as the apiserver
// relays it; an oversized body is not read past the limit.
func TestHandlerRefusesWhatIsNotAReview(t *testing.T) {
	valid := admissionReview(t, admissionv1.Create, benchGatewayOf(0), nil)
	replace := func(old, new string) []byte { return bytes.Replace(valid, []byte(old), []byte(new), 1) }
	tests := []struct {
		name        string
		contentType string
		body        []byte
		want        string
	}{
		{"an empty body", "application/json", nil, "request body is empty"},
		{"YAML", "application/yaml", valid, "contentType=application/yaml, expected application/json"},
		{"not JSON", "application/json", []byte(`{"apiVersion":`), "decode the AdmissionReview"},
		{"a v1beta1 review", "application/json", replace(`"apiVersion":"admission.k8s.io/v1"`, `"apiVersion":"admission.k8s.io/v1beta1"`), `apiVersion "admission.k8s.io/v1beta1"`},
		{"a review without a request", "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), "request present: false"},
		{"an unknown operation", "application/json", replace(`"operation":"CREATE"`, `"operation":"PATCH"`), `unknown operation "PATCH"`},
		{"another kind", "application/json", replace(`"kind":"Gateway"`, `"kind":"StoredQuery"`), "request.kind is ferrofed.io/v1alpha1, Kind=StoredQuery"},
		{"an object that is not a Gateway", "application/json", replace(`"replicas":1`, `"replicas":"one"`), "decode the AdmissionReview (its request.object as a Gateway): json: cannot unmarshal string"},
		{"a create without an object", "application/json", replace(`"object":{`, `"object":null,"x":{`), "the CREATE review has no request.object"},
		{"a body over the limit", "application/json", append(bytes.Repeat([]byte(" "), MaxReviewBytes), valid...), "request entity is too large; limit is 7340032 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, WebhookPath, bytes.NewReader(tc.body))
			if tc.body == nil {
				req.Body = http.NoBody
			}
			req.Header.Set("Content-Type", tc.contentType)
			GatewayValidator{}.ServeHTTP(rec, req)
			out := answer(t, rec)
			r := out.Response
			if r.Allowed || r.Result == nil || r.Result.Code != http.StatusBadRequest || !strings.Contains(r.Result.Message, tc.want) {
				t.Errorf("answer %+v, want allowed=false, code 400, a message containing %q", r, tc.want)
			}
		})
	}
}

// inlineOf is the Gateway of the benchmark (benchGatewayOf) with its inline
// configuration padded to size bytes with blank lines before its last line, last.
func inlineOf(size int, last string) *ferrofedv1alpha1.Gateway {
	gw := benchGatewayOf(9)
	pad := size - len(*gw.Spec.Config.Inline) - len(last)
	gw.Spec.Config.Inline = ptr.To(*gw.Spec.Config.Inline + strings.Repeat("\n", pad) + last)
	return gw
}

// TestWebhookBoundsTheInlineConfiguration: an inline configuration over
// MaxInlineConfigBytes is refused by its size, naming spec.config.inline, before it is
// read (a configuration within it is checked whole, its problem on its last line found).
// The webhook used to check any size, at a cost that grew with the square of its lines.
func TestWebhookBoundsTheInlineConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name  string
		size  int
		field string
		want  string
	}{
		{"one byte over", ferrofedv1alpha1.MaxInlineConfigBytes + 1, "spec.config.inline", "may not be more than 262144 bytes; it has 262145"},
		{"1 MiB", 1 << 20, "spec.config.inline", "may not be more than 262144 bytes; it has 1048576"},
		{"at the limit", ferrofedv1alpha1.MaxInlineConfigBytes, "spec.config.inline", "health.check_timeout_ms: must be an integer, not a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := answer(t, serve(GatewayValidator{}, admissionReview(t, admissionv1.Create, inlineOf(tc.size, "[health]\ncheck_timeout_ms = \"1s\"\n"), nil))).Response
			if r.Allowed || r.Result == nil || r.Result.Details == nil || len(r.Result.Details.Causes) != 1 {
				t.Fatalf("answer %+v, want one cause", r)
			}
			if c := r.Result.Details.Causes[0]; c.Field != tc.field || !strings.Contains(c.Message, tc.want) {
				t.Fatalf("cause %+v, want field %s with %q", c, tc.field, tc.want)
			}
		})
	}
}

// TestWebhookAnswersWithinItsTimeout: a review whose validation does not finish within
// three quarters of the apiserver's timeout (its query parameter timeout) is answered,
// while the apiserver still waits, refused with code 504 and a message naming the
// inline configuration it could not check.
func TestWebhookAnswersWithinItsTimeout(t *testing.T) {
	beforeReview = func(ctx context.Context) { <-ctx.Done() } // a validation that never ends in time
	t.Cleanup(func() { beforeReview = nil })
	body := admissionReview(t, admissionv1.Create, inlineOf(4096, ""), nil)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, WebhookPath+"?timeout=1s", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	GatewayValidator{}.ServeHTTP(rec, req)
	r := answer(t, rec).Response
	if r.Allowed || r.Result == nil || r.Result.Code != http.StatusGatewayTimeout || r.Result.Reason != metav1.StatusReasonTimeout ||
		!strings.Contains(r.Result.Message, "did not finish within 750ms") || !strings.Contains(r.Result.Message, "spec.config.inline (4096 bytes)") {
		t.Fatalf("answer %+v, want refused with 504 Timeout naming 750ms and spec.config.inline", r)
	}
}

func TestReviewBudgetIsThreeQuartersOfTheTimeout(t *testing.T) {
	for query, want := range map[string]time.Duration{
		"":              7500 * time.Millisecond,
		"?timeout=10s":  7500 * time.Millisecond,
		"?timeout=1s":   750 * time.Millisecond,
		"?timeout=30s":  22500 * time.Millisecond,
		"?timeout=31s":  7500 * time.Millisecond,
		"?timeout=-1s":  7500 * time.Millisecond,
		"?timeout=soon": 7500 * time.Millisecond,
	} {
		if got := reviewBudget(httptest.NewRequest(http.MethodPost, WebhookPath+query, nil)); got != want {
			t.Errorf("%q: %s, want %s", query, got, want)
		}
	}
}

// BenchmarkWebhookCreate256KiB is the webhook's answer to a create whose inline
// configuration is MaxInlineConfigBytes with its problem on its last line (a wrong type,
// found by `config check` of the rendered file; a syntax error, found in the inline
// text itself), or with an unknown key on every line; p99-ns is the 99th percentile of
// the ops of the run.
func BenchmarkWebhookCreate256KiB(b *testing.B) {
	var keys strings.Builder
	for i := 0; keys.Len() < ferrofedv1alpha1.MaxInlineConfigBytes-4096; i++ {
		fmt.Fprintf(&keys, "key_%d = 1\n", i)
	}
	for _, tc := range []struct{ name, last string }{
		{"a wrong type at the end", "[health]\ncheck_timeout_ms = \"1s\"\n"},
		{"a syntax error at the end", "[health\n"},
		{"an unknown key on every line", keys.String()},
	} {
		body := admissionReview(b, admissionv1.Create, inlineOf(ferrofedv1alpha1.MaxInlineConfigBytes, tc.last), nil)
		b.Run(strings.ReplaceAll(tc.name, " ", "_"), func(b *testing.B) {
			b.ReportAllocs()
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				rec := serve(GatewayValidator{}, body)
				took = append(took, time.Since(start))
				if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"allowed":false`)) {
					b.Fatalf("%d %.300s", rec.Code, rec.Body.String())
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)*99/100]), "p99-ns")
		})
	}
}

// TestWebhookListsAtMostMaxConfigCauses: a configuration with more problems than
// MaxConfigCauses is refused with the first of them and one cause counting the rest;
// one of more than config.MaxUnknownKeys unknown keys with its first ones and their
// count, before anything decodes it.
func TestWebhookListsAtMostMaxConfigCauses(t *testing.T) {
	var members, keys strings.Builder
	for i := range gatewayspec.MaxConfigCauses + 50 {
		fmt.Fprintf(&members, "[[registry.members]]\nid = \"m%d\"\nquery_endpoint = \"ftp://m/fhir\"\n", i)
	}
	for i := range 5000 {
		fmt.Fprintf(&keys, "key_%d = 1\n", i)
	}
	for _, tc := range []struct {
		name, inline string
		causes       int
		last         string
	}{
		{"many problems", members.String(), gatewayspec.MaxConfigCauses + 1, "and 50 more problem(s), not listed"},
		{"many unknown keys", keys.String(), config.MaxUnknownKeys + 1, "(document): has 5000 keys that no key of ferrofed.toml takes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := benchGatewayOf(10)
			gw.Spec.Config.Inline = ptr.To(issuer.WithRemote(tc.inline))
			r := answer(t, serve(GatewayValidator{}, admissionReview(t, admissionv1.Create, gw, nil))).Response
			if r.Allowed || r.Result == nil || r.Result.Details == nil {
				t.Fatalf("answer %+v, want refused with causes", r)
			}
			causes := r.Result.Details.Causes
			if len(causes) != tc.causes || !strings.Contains(causes[len(causes)-1].Message, tc.last) {
				t.Fatalf("%d causes, the last %+v; want %d, the last with %q", len(causes), causes[len(causes)-1], tc.causes, tc.last)
			}
		})
	}
}
