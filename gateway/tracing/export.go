package tracing

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// The environment variables whose values go in the resource, each when set (the
// operator sets them from the downward API; docs/tracing.md, "What is recorded").
const (
	EnvPodName      = config.EnvPodName      // k8s.pod.name
	EnvPodNamespace = config.EnvPodNamespace // k8s.namespace.name
	EnvGatewayName  = config.EnvGatewayName  // ferrofed.gateway.name
)

// maxResourceValueBytes bounds a resource value read from the environment (a
// Kubernetes name is at most 253 bytes).
const maxResourceValueBytes = 253

// Exporter makes the exporter of a [tracing] table; tests replace the OTLP/HTTP one.
type Exporter func(t *config.Tracing) (sdktrace.SpanExporter, error)

// OTLP is the exporter of a [tracing] table: OTLP/HTTP (protobuf) to
// {endpoint}/v1/traces through a client of its own (tracing.ca_file, the 64 KiB cap on
// an answer head, no proxy from the environment but the standard one), with the
// headers of tracing.headers_file read again at each export. No OTEL_EXPORTER_OTLP_*
// variable changes where spans go or what they carry: every option is set.
func OTLP(t *config.Tracing) (sdktrace.SpanExporter, error) {
	base := &http.Transport{Proxy: http.ProxyFromEnvironment, MaxResponseHeaderBytes: 64 << 10,
		MaxIdleConnsPerHost: 2, IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true}
	if t.CAFile != "" {
		pool, err := config.ReadCertPool("tracing.ca_file", t.CAFile)
		if err != nil {
			return nil, err
		}
		base.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	client := &http.Client{Transport: &headersTransport{base: base, file: t.HeadersFile}, Timeout: t.Timeout()}
	opts := []otlptracehttp.Option{
		otlptracehttp.WithEndpointURL(t.TracesURL()),
		otlptracehttp.WithHTTPClient(client),
		otlptracehttp.WithTimeout(t.Timeout()),
		otlptracehttp.WithHeaders(map[string]string{}),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression),
		// One export is one try: the queue's next batch is the retry, and memory stays bounded.
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
	}
	if strings.HasPrefix(t.Endpoint, "http:") {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	return otlptracehttp.New(context.Background(), opts...)
}

// headersTransport sets the headers of tracing.headers_file on every export, read
// now: a rotated collector token is used from the next export on.
type headersTransport struct {
	base *http.Transport
	file string
}

func (h *headersTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if h.file != "" {
		hs, err := config.ReadTracingHeaders("tracing.headers_file", h.file)
		if err != nil {
			if r.Body != nil {
				_ = r.Body.Close()
			}
			return nil, err
		}
		r = r.Clone(r.Context())
		for _, hd := range hs {
			r.Header.Set(hd.Name, hd.Value)
		}
	}
	return h.base.RoundTrip(r)
}

// Resource is the resource every exported span carries: service.name
// (tracing.service_name), service.version when the binary knows it, and the pod's
// name and namespace and the Gateway's name from the environment when set.
func Resource(t *config.Tracing) *resource.Resource {
	kvs := []attribute.KeyValue{attribute.String("service.name", t.ServiceName)}
	if v := serviceVersion(); v != "" {
		kvs = append(kvs, attribute.String("service.version", v))
	}
	for env, key := range map[string]string{EnvPodName: "k8s.pod.name", EnvPodNamespace: "k8s.namespace.name", EnvGatewayName: "ferrofed.gateway.name"} {
		if v := os.Getenv(env); v != "" && len(v) <= maxResourceValueBytes && printable(v) {
			kvs = append(kvs, attribute.String(key, v))
		}
	}
	return resource.NewSchemaless(kvs...)
}

// serviceVersion is the main module's version, when the binary was built from a
// tagged module ("" for a development build).
func serviceVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		return ""
	}
	return bi.Main.Version
}

func printable(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < ' ' || r > '~' }) < 0
}

// newSink makes the sink of a [tracing] table.
func newSink(t *config.Tracing, exporter Exporter) (*sink, error) {
	exp, err := exporter(t)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	return &sink{exporter: exp, resource: Resource(t), timeout: t.Timeout()}, nil
}
