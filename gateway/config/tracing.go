package config

import (
	"bytes"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"
)

// The [tracing] table (docs/tracing.md): OpenTelemetry traces, exported over OTLP/HTTP.
// Absent, the gateway makes no span and installs nothing on the request path.

// Defaults and limits of [tracing].
const (
	// DefaultTracingTimeoutMS bounds one export (one POST to {endpoint}/v1/traces).
	DefaultTracingTimeoutMS = 5000
	// MaxTracingTimeoutMS bounds tracing.timeout_ms: an export slower than that holds
	// the queue behind it while spans are dropped.
	MaxTracingTimeoutMS = 60000
	// DefaultTracingServiceName is tracing.service_name's default.
	DefaultTracingServiceName = "ferrofed"
	// MaxTracingServiceNameBytes bounds tracing.service_name.
	MaxTracingServiceNameBytes = 128
	// MaxTracingEndpointBytes bounds tracing.endpoint.
	MaxTracingEndpointBytes = 2048
	// MaxTracingHeadersFileBytes bounds tracing.headers_file.
	MaxTracingHeadersFileBytes = 16 << 10
	// MaxTracingHeaders bounds the headers of tracing.headers_file.
	MaxTracingHeaders = 32
	// TracingPath is what the exporter appends to tracing.endpoint (OTLP/HTTP).
	TracingPath = "/v1/traces"
)

// The environment variables gateway/tracing reads into the spans' resource, each when
// set; the operator sets all three on every gateway container (the pod's name and
// namespace from the downward API, the Gateway's name). Here so that the operator's
// builders and the gateway name them alike.
const (
	EnvPodName      = "FERROFED_POD_NAME"
	EnvPodNamespace = "FERROFED_POD_NAMESPACE"
	EnvGatewayName  = "FERROFED_GATEWAY_NAME"
)

// Tracing is the [tracing] table.
type Tracing struct {
	// Endpoint is the OTLP/HTTP receiver's base URL (http or https; no credentials,
	// query or fragment): spans are posted to {endpoint}/v1/traces. Required.
	Endpoint string `toml:"endpoint"`
	// SamplingRatio is the share of new traces kept, from 0 to 1 (default 1). It is
	// parent-based: a caller's sampled traceparent is always kept, an unsampled one never.
	SamplingRatio *float64 `toml:"sampling_ratio"`
	// TimeoutMS bounds one export; default 5000, from 1 to 60000.
	TimeoutMS *int64 `toml:"timeout_ms"`
	// HeadersFile is a file of `Name: value` lines sent with every export (a
	// collector's token), read again at each export: a rotated Secret is used from the
	// next export on.
	HeadersFile string `toml:"headers_file"`
	// CAFile is the PEM bundle an https endpoint is verified with (default: the
	// system's roots).
	CAFile string `toml:"ca_file"`
	// ServiceName is the resource's service.name; default "ferrofed".
	ServiceName string `toml:"service_name"`
}

// Ratio is tracing.sampling_ratio resolved.
func (t *Tracing) Ratio() float64 {
	if t == nil || t.SamplingRatio == nil {
		return 1
	}
	return *t.SamplingRatio
}

// Timeout is tracing.timeout_ms resolved.
func (t *Tracing) Timeout() time.Duration {
	if t == nil || t.TimeoutMS == nil {
		return ms(DefaultTracingTimeoutMS)
	}
	return ms(*t.TimeoutMS)
}

// TracesURL is the URL spans are posted to: {endpoint}/v1/traces.
func (t *Tracing) TracesURL() string {
	return strings.TrimSuffix(t.Endpoint, "/") + TracingPath
}

func (t *Tracing) applyDefaults() {
	if t != nil && t.ServiceName == "" {
		t.ServiceName = DefaultTracingServiceName
	}
}

// tracingProblems returns the problems of [tracing], each naming its key.
func (c *Config) tracingProblems(opts Options) []Problem {
	t := c.Tracing
	if t == nil {
		return nil
	}
	var ps []Problem
	add := func(key, format string, args ...any) {
		ps = append(ps, Problem{Key: "tracing." + key, Message: fmt.Sprintf(format, args...)})
	}
	if msg := tracingEndpointProblem(t.Endpoint); msg != "" {
		add("endpoint", "%s", msg)
	}
	if r := t.SamplingRatio; r != nil && (math.IsNaN(*r) || *r < 0 || *r > 1) {
		add("sampling_ratio", "%v must be from 0 to 1 (the share of new traces kept)", *r)
	}
	if t.TimeoutMS != nil {
		if msg := msProblem("tracing.timeout_ms", *t.TimeoutMS); msg != "" {
			add("timeout_ms", "%s", msg)
		}
	}
	if msg := tracingServiceNameProblem(t.ServiceName); msg != "" {
		add("service_name", "%s", msg)
	}
	if t.CAFile != "" && !strings.HasPrefix(t.Endpoint, "https:") {
		add("ca_file", "needs an https tracing.endpoint")
	} else if t.CAFile != "" && !opts.SkipFiles {
		if _, err := ReadCertPool("tracing.ca_file", t.CAFile); err != nil {
			ps = append(ps, fileProblem("tracing.ca_file", err))
		}
	}
	if t.HeadersFile != "" && !opts.SkipFiles {
		if _, err := ReadTracingHeaders("tracing.headers_file", t.HeadersFile); err != nil {
			ps = append(ps, fileProblem("tracing.headers_file", err))
		}
	}
	sortProblems(ps)
	return ps
}

// tracingEndpointProblem is what is wrong with tracing.endpoint, or "".
func tracingEndpointProblem(raw string) string {
	if raw == "" {
		return "is required: the OTLP/HTTP receiver's base URL (spans are posted to {endpoint}" + TracingPath + ")"
	}
	if len(raw) > MaxTracingEndpointBytes {
		return fmt.Sprintf("is longer than %d bytes", MaxTracingEndpointBytes)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return "must be an absolute http or https URL"
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		// The URL is logged; a collector's token goes in tracing.headers_file.
		return "must not carry credentials, a query or a fragment (a collector's token goes in tracing.headers_file)"
	case strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), TracingPath):
		return fmt.Sprintf("is the base URL: the gateway appends %s itself", TracingPath)
	}
	return ""
}

// tracingServiceNameProblem is what is wrong with tracing.service_name, or "".
func tracingServiceNameProblem(s string) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "must not be empty"
	case len(s) > MaxTracingServiceNameBytes:
		return fmt.Sprintf("is longer than %d bytes", MaxTracingServiceNameBytes)
	case strings.IndexFunc(s, func(r rune) bool { return r < ' ' || r > '~' }) >= 0:
		return "must be printable ASCII"
	}
	return ""
}

// Header is one header of tracing.headers_file.
type Header struct{ Name, Value string }

// reservedTracingHeaders are what the exporter sets itself: a headers file may not.
var reservedTracingHeaders = []string{"Content-Type", "Content-Length", "Content-Encoding", "Transfer-Encoding",
	"Host", "Connection", "Traceparent", "Tracestate", "Baggage"}

// ReadTracingHeaders reads tracing.headers_file (key names it): at most
// MaxTracingHeadersFileBytes, one `Name: value` per line (blank lines and lines
// starting with # skipped, a line may end in CRLF), a name of RFC 9110 token
// characters, a value of visible ASCII, spaces and tabs (no CR, LF or NUL), at most
// MaxTracingHeaders headers, none the exporter sets itself. The error is a *FileError
// naming key and the line, never the value.
func ReadTracingHeaders(key, path string) ([]Header, error) {
	data, err := ReadFile(key, path, MaxTracingHeadersFileBytes)
	if err != nil {
		return nil, err
	}
	var out []Header
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		if s := strings.TrimSpace(string(line)); s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		h, msg := parseHeaderLine(string(line))
		if msg != "" {
			return nil, &FileError{Key: key, Err: fmt.Errorf("%s line %d: %s", path, i+1, msg)}
		}
		if out = append(out, h); len(out) > MaxTracingHeaders {
			return nil, &FileError{Key: key, Err: fmt.Errorf("%s holds more than %d headers", path, MaxTracingHeaders)}
		}
	}
	return out, nil
}

// parseHeaderLine reads one `Name: value` line, or says what is wrong with it
// (without repeating the value: it is a credential).
func parseHeaderLine(line string) (Header, string) {
	name, value, ok := strings.Cut(line, ":")
	switch {
	case !ok:
		return Header{}, "is not `Name: value`"
	case name == "" || strings.IndexFunc(name, func(r rune) bool { return !isTokenChar(r) }) >= 0:
		return Header{}, "the header name must be a token (letters, digits and !#$%&'*+-.^_`|~), with no space before the colon"
	case strings.IndexFunc(value, func(r rune) bool { return (r < ' ' && r != '\t') || r > '~' }) >= 0:
		return Header{}, "the value must be visible ASCII, spaces and tabs (no CR, LF or control character)"
	}
	value = strings.Trim(value, " \t")
	if value == "" {
		return Header{}, "the value is empty"
	}
	for _, r := range reservedTracingHeaders {
		if strings.EqualFold(name, r) {
			return Header{}, fmt.Sprintf("%s is set by the exporter itself", r)
		}
	}
	return Header{Name: name, Value: value}, ""
}

// isTokenChar reports whether r may be in an HTTP field name (RFC 9110 §5.6.2, tchar).
func isTokenChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	}
	return r < 0x80 && strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}
