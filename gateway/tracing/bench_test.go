package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/go-logr/logr"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// discard exports nothing, at once.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *nopWriter) WriteHeader(int)             {}

// BenchmarkServerSpan is what the server span costs a request on a bare gin route:
// without the middleware ([tracing] absent), with every trace kept (sampling_ratio 1,
// exported through the allow-list to an exporter that discards), and with none kept.
func BenchmarkServerSpan(b *testing.B) {
	gin.SetMode(gin.ReleaseMode)
	ok := func(c *gin.Context) { c.Status(http.StatusOK) }
	bare := gin.New()
	bare.GET("/fhir/*path", ok)
	traced := func(ratio string) *gin.Engine {
		cfg, err := config.Parse([]byte("[auth]\ndata_plane = \"open\"\n[tracing]\nendpoint = \"http://c:4318\"\nsampling_ratio = "+ratio+"\n"), "b.toml", config.Options{})
		if err != nil {
			b.Fatal(err)
		}
		tr, err := New(cfg, Options{Logger: logr.Discard(), Exporter: func(*config.Tracing) (sdktrace.SpanExporter, error) { return discard{}, nil }})
		if err != nil {
			b.Fatal(err)
		}
		_ = tr.Start()
		b.Cleanup(func() { _, _ = tr.queue.close(context.Background()) })
		e := gin.New()
		e.GET("/fhir/*path", tr.Middleware(), ok)
		return e
	}
	for _, bc := range []struct {
		name string
		e    func() *gin.Engine
	}{{"absent", func() *gin.Engine { return bare }}, {"ratio_1", func() *gin.Engine { return traced("1.0") }}, {"ratio_0", func() *gin.Engine { return traced("0.0") }}} {
		b.Run(bc.name, func(b *testing.B) {
			e := bc.e()
			req := httptest.NewRequest(http.MethodGet, "/fhir/Patient?family=x&birthdate=y", nil)
			w := &nopWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				e.ServeHTTP(w, req)
			}
		})
	}
}
