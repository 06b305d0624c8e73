package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func TestOperatorTracingFlagsAreCheckedNamingTheFlag(t *testing.T) {
	headers := filepath.Join(t.TempDir(), "headers")
	if err := os.WriteFile(headers, []byte("Authorization: Bearer x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := operatorTracing{endpoint: "http://otel:4318", ratio: 1, timeout: 5 * time.Second, serviceName: defaultOperatorServiceName}
	cases := map[string]struct {
		mutate func(*operatorTracing)
		want   string
	}{
		"the defaults with an endpoint": {func(*operatorTracing) {}, ""},
		"a headers file":                {func(o *operatorTracing) { o.headersFile = headers }, ""},
		"a grpc endpoint":               {func(o *operatorTracing) { o.endpoint = "grpc://otel:4317" }, "--tracing-endpoint"},
		"the traces path":               {func(o *operatorTracing) { o.endpoint = "http://otel:4318/v1/traces" }, "--tracing-endpoint is the base URL"},
		"a ratio above 1":               {func(o *operatorTracing) { o.ratio = 1.5 }, "--tracing-sampling-ratio"},
		"a timeout of 2 minutes":        {func(o *operatorTracing) { o.timeout = 2 * time.Minute }, "--tracing-timeout"},
		"a CA with http":                {func(o *operatorTracing) { o.caFile = "/ca.pem" }, "--tracing-ca-file needs an https"},
		"a missing headers file":        {func(o *operatorTracing) { o.headersFile = headers + ".absent" }, "--tracing-headers-file"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := ok
			tc.mutate(&o)
			err := o.validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestNoEndpointNoProvider(t *testing.T) {
	tp, shutdown, err := operatorTracing{}.provider(logr.Discard())
	if tp != nil || err != nil {
		t.Fatalf("provider = %v, %v; want none", tp, err)
	}
	shutdown()
}

func TestTheProviderFlushesWithinItsBoundWhenTheCollectorIsDown(t *testing.T) {
	// A closed port: the flush at exit fails fast, and never past its bound.
	o := operatorTracing{endpoint: "http://127.0.0.1:1", ratio: 1, timeout: 200 * time.Millisecond, serviceName: "ferrofed-operator"}
	tp, shutdown, err := o.provider(logr.Discard())
	if err != nil || tp == nil {
		t.Fatalf("provider: %v", err)
	}
	_, span := tp.Tracer("test").Start(t.Context(), "reconcile Gateway")
	span.End()
	start := time.Now()
	shutdown()
	if took := time.Since(start); took > operatorTracingShutdownWait+time.Second {
		t.Errorf("the flush took %s, more than its bound %s", took, operatorTracingShutdownWait)
	}
}
