package tracing

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// MaxQueryParameterNames bounds ferrofed.query.parameters; past it the list ends with
// "(more)".
const MaxQueryParameterNames = 32

// maxParameterNameBytes bounds one recorded parameter name.
const maxParameterNameBytes = 64

// knownMethods are the methods a span is named by; any other is "_OTHER" (the HTTP
// semantic conventions' rule).
var knownMethods = map[string]bool{http.MethodGet: true, http.MethodHead: true, http.MethodPost: true,
	http.MethodPut: true, http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
	http.MethodConnect: true, http.MethodTrace: true, "_OTHER": true}

// Middleware makes one server span per request of the routes it is installed on (the
// server installs it on the data-plane and operator groups only: no probe or metrics
// request makes a span). The span is named "METHOD {route template}" from gin's
// FullPath, never the raw path, joined to the caller's traceparent/tracestate (its
// baggage is not read), and carries the HTTP semantic conventions' attributes and the
// query's parameter names, never their values.
func (t *Tracing) Middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		r := c.Request
		ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		method := r.Method
		if !knownMethods[method] {
			method = "_OTHER"
		}
		route := c.FullPath()
		name := method + " " + route
		ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
		if span.IsRecording() {
			t.routes.add(name)
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			span.SetAttributes(AttrMethod.String(method), AttrRoute.String(route), AttrScheme.String(scheme))
			if names := queryNames(r.URL.RawQuery); len(names) > 0 {
				span.SetAttributes(AttrQueryParameters.StringSlice(names))
			}
		}
		c.Request = r.WithContext(ctx)
		defer span.End()
		c.Next()
		status := c.Writer.Status()
		span.SetAttributes(attribute.Int(string(AttrStatusCode), status))
		if status >= 500 {
			span.SetStatus(codes.Error, "")
		}
	}
}

// queryNames are the names of a query's parameters, unescaped, deduplicated and sorted,
// at most MaxQueryParameterNames: a name that is not of a FHIR search parameter's
// syntax (letters, digits, _ - . : and at most 64 bytes: a modifier, a chain, _has)
// is recorded as "(other)", never as written, since a client may put anything there.
func queryNames(raw string) []string {
	if raw == "" {
		return nil
	}
	var names []string
	more := false
	for part := range strings.SplitSeq(raw, "&") {
		name, _, _ := strings.Cut(part, "=")
		if name == "" {
			continue
		}
		if n, err := url.QueryUnescape(name); err != nil || !parameterName(n) {
			name = "(other)"
		} else {
			name = n
		}
		if !slices.Contains(names, name) {
			if len(names) == MaxQueryParameterNames {
				more = true
				continue
			}
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if more {
		names = append(names, "(more)")
	}
	return names
}

func parameterName(s string) bool {
	return s != "" && len(s) <= maxParameterNameBytes && strings.IndexFunc(s, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && !strings.ContainsRune("_-.:", r)
	}) < 0
}
