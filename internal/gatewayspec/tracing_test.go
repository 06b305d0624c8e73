package gatewayspec

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/config"
)

func TestSpecTracingRendersTheTracingTable(t *testing.T) {
	cases := []struct {
		name    string
		tracing *ferrofedv1alpha1.Tracing
		want    []string // lines of the rendered [tracing]
		notWant []string
	}{
		{"the endpoint alone renders the endpoint alone", &ferrofedv1alpha1.Tracing{Endpoint: "http://otel-collector.observability:4318"},
			[]string{"[tracing]", "endpoint = 'http://otel-collector.observability:4318'"},
			[]string{"\nsampling_ratio", "\ntimeout_ms", "\nheaders_file", "\nca_file", "\nservice_name"}},
		{"every field renders its key, the Secrets at their mounts", &ferrofedv1alpha1.Tracing{
			Endpoint: "https://collector.example.org/otlp", SamplingRatio: ptr.To("0.25"), Timeout: d("2500ms"),
			HeadersSecret: &ferrofedv1alpha1.SecretKeySelector{Name: "otel", Key: "headers.txt"},
			CASecret:      &ferrofedv1alpha1.SecretKeyRef{Name: "otel-ca", Key: "bundle.pem"}, ServiceName: ptr.To("ferrofed-edge")},
			[]string{"endpoint = 'https://collector.example.org/otlp'", "sampling_ratio = 0.25", "timeout_ms = 2500",
				"headers_file = '" + TracingHeadersFile + "'", "ca_file = '" + TracingCAFile + "'", "service_name = 'ferrofed-edge'"}, nil},
		{"a ratio of 0 is rendered, not left out", &ferrofedv1alpha1.Tracing{Endpoint: "http://c:4318", SamplingRatio: ptr.To("0")},
			[]string{"sampling_ratio = 0.0"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := &ferrofedv1alpha1.Gateway{Spec: ferrofedv1alpha1.GatewaySpec{Image: "x", Tracing: tc.tracing, Config: withIssuer("")}}
			if errs, _ := Validate(g); len(errs) != 0 {
				t.Fatalf("Validate: %v", errs)
			}
			rendered, err := RenderAndCheck(&g.Spec, Plan(&g.Spec), []byte(*g.Spec.Config.Inline))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(rendered), w) {
					t.Errorf("rendered file lacks %q:\n%s", w, rendered)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(string(rendered), w) {
					t.Errorf("rendered file has %q:\n%s", w, rendered)
				}
			}
			cfg, err := ParseRendered(rendered)
			if err != nil || cfg.Tracing == nil || cfg.Tracing.Endpoint != tc.tracing.Endpoint {
				t.Fatalf("the gateway reads [tracing] %+v, %v", cfg.Tracing, err)
			}
		})
	}
}

func TestWithoutSpecTracingAnInlineTracingTableIsTheUsers(t *testing.T) {
	spec := &ferrofedv1alpha1.GatewaySpec{Image: "x"}
	user := "[tracing]\nendpoint = 'http://c:4318'\nsampling_ratio = 0.5\n"
	rendered, err := RenderAndCheck(spec, Plan(spec), []byte(withIssuerTOML(user)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rendered), "sampling_ratio = 0.5") {
		t.Errorf("the inline [tracing] is not rendered:\n%s", rendered)
	}
}

func withIssuerTOML(toml string) string { return *withIssuer(toml).Inline }

func TestAnInlineTracingTableBesideSpecTracingIsRefusedNamingBoth(t *testing.T) {
	for _, user := range []string{
		"[tracing]\nendpoint = 'http://other:4318'\n",
		"[tracing]\nsampling_ratio = 0.1\n",
	} {
		g := &ferrofedv1alpha1.Gateway{Spec: ferrofedv1alpha1.GatewaySpec{Image: "x",
			Tracing: &ferrofedv1alpha1.Tracing{Endpoint: "http://c:4318"}, Config: withIssuer(user)}}
		errs, _ := Validate(g)
		if len(errs) != 1 || errs[0].Field != "spec.config.inline" {
			t.Fatalf("%q: errors = %v, want one on spec.config.inline", user, errs)
		}
		for _, name := range []string{"tracing:", "spec.tracing"} {
			if !strings.Contains(errs[0].Detail, name) {
				t.Errorf("%q: the refusal %q does not name %s", user, errs[0].Detail, name)
			}
		}
		if _, err := RenderAndCheck(&g.Spec, Plan(&g.Spec), []byte(*g.Spec.Config.Inline)); err == nil ||
			!strings.Contains(ConfigMessage(err), "tracing: is set by the Gateway from spec.tracing") {
			t.Errorf("%q: the controller's render says %v", user, err)
		}
	}
}

// TestSpecTracingGoTwins: each refusal of the CRD's rules on spec.tracing, with the
// field it names and the message the rule gives (test/operator runs the same rows
// through the CEL rules and the webhook).
func TestSpecTracingGoTwins(t *testing.T) {
	ok := func(tr *ferrofedv1alpha1.Tracing) *ferrofedv1alpha1.Tracing {
		if tr.Endpoint == "" {
			tr.Endpoint = "https://collector.example.org"
		}
		return tr
	}
	cases := []struct {
		name    string
		tracing *ferrofedv1alpha1.Tracing
		field   string // "" accepted
		message string
	}{
		{"an https endpoint with a path", ok(&ferrofedv1alpha1.Tracing{Endpoint: "https://c.example/otlp/"}), "", ""},
		{"an http endpoint with a port", ok(&ferrofedv1alpha1.Tracing{Endpoint: "http://10.0.0.1:4318"}), "", ""},
		{"no endpoint", &ferrofedv1alpha1.Tracing{}, "spec.tracing.endpoint", "spec.tracing.endpoint is required"},
		{"a grpc endpoint", &ferrofedv1alpha1.Tracing{Endpoint: "grpc://c:4317"}, "spec.tracing.endpoint", tracingEndpointMessage},
		{"no host", &ferrofedv1alpha1.Tracing{Endpoint: "http:///v1"}, "spec.tracing.endpoint", tracingEndpointMessage},
		{"credentials", &ferrofedv1alpha1.Tracing{Endpoint: "https://u:p@c.example"}, "spec.tracing.endpoint", tracingEndpointMessage},
		{"a query", &ferrofedv1alpha1.Tracing{Endpoint: "https://c.example/?token=x"}, "spec.tracing.endpoint", tracingEndpointMessage},
		{"the traces path", &ferrofedv1alpha1.Tracing{Endpoint: "https://c.example/v1/traces"}, "spec.tracing.endpoint", tracingEndpointMessage},
		{"a ratio of 1.0", ok(&ferrofedv1alpha1.Tracing{SamplingRatio: ptr.To("1.0")}), "", ""},
		{"a ratio of 0.000001", ok(&ferrofedv1alpha1.Tracing{SamplingRatio: ptr.To("0.000001")}), "", ""},
		{"a ratio above 1", ok(&ferrofedv1alpha1.Tracing{SamplingRatio: ptr.To("1.5")}), "spec.tracing.samplingRatio", tracingRatioMessage},
		{"a percentage", ok(&ferrofedv1alpha1.Tracing{SamplingRatio: ptr.To("25%")}), "spec.tracing.samplingRatio", tracingRatioMessage},
		{"seven decimals", ok(&ferrofedv1alpha1.Tracing{SamplingRatio: ptr.To("0.1234567")}), "spec.tracing.samplingRatio", tracingRatioMessage},
		{"a timeout of 60s", ok(&ferrofedv1alpha1.Tracing{Timeout: d("60s")}), "", ""},
		{"a timeout over 60s", ok(&ferrofedv1alpha1.Tracing{Timeout: d("60.001s")}), "spec.tracing.timeout", tracingTimeoutMessage},
		{"a zero timeout", ok(&ferrofedv1alpha1.Tracing{Timeout: d("0s")}), "spec.tracing.timeout", tracingTimeoutMessage},
		{"a CA with an https endpoint", ok(&ferrofedv1alpha1.Tracing{CASecret: &ferrofedv1alpha1.SecretKeyRef{Name: "ca"}}), "", ""},
		{"a CA with an http endpoint", &ferrofedv1alpha1.Tracing{Endpoint: "http://c:4318", CASecret: &ferrofedv1alpha1.SecretKeyRef{Name: "ca"}},
			"spec.tracing.caSecret", tracingCANeedsHTTPS},
		{"a service name of spaces", ok(&ferrofedv1alpha1.Tracing{ServiceName: ptr.To("   ")}), "spec.tracing.serviceName", tracingServiceNameMessage},
		{"a service name with a newline", ok(&ferrofedv1alpha1.Tracing{ServiceName: ptr.To("a\nb")}), "spec.tracing.serviceName", tracingServiceNameMessage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := &ferrofedv1alpha1.Gateway{Spec: ferrofedv1alpha1.GatewaySpec{Image: "x", Tracing: tc.tracing, Config: withIssuer("")}}
			errs, _ := Validate(g)
			if tc.field == "" {
				if len(errs) != 0 {
					t.Fatalf("errors = %v", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != tc.field || !strings.Contains(errs[0].Error(), tc.message) {
				t.Fatalf("errors = %v, want one on %s: %s", errs, tc.field, tc.message)
			}
		})
	}
}

func TestEveryTracingKeyIsOneTheGatewayReads(t *testing.T) {
	// The rendered table goes through the gateway's own parser: a key spelled wrong in
	// config.Tracing's tags would be refused as unknown.
	tr := TracingOwned(&ferrofedv1alpha1.Tracing{Endpoint: "https://c.example", SamplingRatio: ptr.To("0.5"), Timeout: d("1s"),
		HeadersSecret: &ferrofedv1alpha1.SecretKeySelector{Name: "h", Key: "k"}, CASecret: &ferrofedv1alpha1.SecretKeyRef{Name: "c"}, ServiceName: ptr.To("s")})
	want := config.Tracing{Endpoint: "https://c.example", SamplingRatio: ptr.To(0.5), TimeoutMS: ptr.To[int64](1000),
		HeadersFile: TracingHeadersFile, CAFile: TracingCAFile, ServiceName: "s"}
	if tr.Endpoint != want.Endpoint || *tr.SamplingRatio != *want.SamplingRatio || *tr.TimeoutMS != *want.TimeoutMS ||
		tr.HeadersFile != want.HeadersFile || tr.CAFile != want.CAFile || tr.ServiceName != want.ServiceName {
		t.Errorf("TracingOwned = %+v, want %+v", tr, want)
	}
}
