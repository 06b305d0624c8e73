package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTheTracingTable(t *testing.T) {
	f := newFiles(t)
	headers := func(name, body string) string {
		p := filepath.Join(f.dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := headers("good", "# the collector's token\nAuthorization: Bearer abc\r\n\nX-Scope-OrgID: tenant-1\n")
	many := headers("many", strings.Repeat("X-A: b\n", MaxTracingHeaders+1))
	const table = "[tracing]\nendpoint = \"http://otel-collector:4318\"\n"
	cases := []struct {
		name    string
		doc     string
		wantKey string // "" when the document is accepted
		wantMsg string
	}{
		{"the endpoint alone", table, "", ""},
		{"every key", "[tracing]\nendpoint = \"https://otel.example/base/\"\nsampling_ratio = 0.25\ntimeout_ms = 60000\n" +
			"headers_file = \"" + good + "\"\nca_file = \"" + f.ca + "\"\nservice_name = \"ferrofed-eu\"\n", "", ""},
		{"a ratio written as an integer", table + "sampling_ratio = 0\n", "", ""},
		{"no endpoint", "[tracing]\nsampling_ratio = 1.0\n", "tracing.endpoint", "is required"},
		{"an endpoint that is no URL", "[tracing]\nendpoint = \"otel:4318\"\n", "tracing.endpoint", "absolute http or https"},
		{"a grpc endpoint", "[tracing]\nendpoint = \"grpc://otel:4317\"\n", "tracing.endpoint", "absolute http or https"},
		{"an endpoint with credentials", "[tracing]\nendpoint = \"http://u:p@otel:4318\"\n", "tracing.endpoint", "credentials"},
		{"an endpoint with a query", "[tracing]\nendpoint = \"http://otel:4318?token=x\"\n", "tracing.endpoint", "a query"},
		{"an endpoint with a fragment", "[tracing]\nendpoint = \"http://otel:4318#x\"\n", "tracing.endpoint", "a fragment"},
		{"an endpoint naming the traces path", "[tracing]\nendpoint = \"http://otel:4318/v1/traces\"\n", "tracing.endpoint", "appends /v1/traces"},
		{"an endpoint too long", "[tracing]\nendpoint = \"http://otel/" + strings.Repeat("a", MaxTracingEndpointBytes) + "\"\n", "tracing.endpoint", "longer than"},
		{"a negative ratio", table + "sampling_ratio = -0.1\n", "tracing.sampling_ratio", "from 0 to 1"},
		{"a ratio past 1", table + "sampling_ratio = 1.5\n", "tracing.sampling_ratio", "from 0 to 1"},
		{"a NaN ratio", table + "sampling_ratio = nan\n", "tracing.sampling_ratio", "from 0 to 1"},
		{"a ratio that is a string", table + "sampling_ratio = \"1\"\n", "tracing.sampling_ratio", ""},
		{"a zero timeout", table + "timeout_ms = 0\n", "tracing.timeout_ms", "greater than zero"},
		{"a timeout past a minute", table + "timeout_ms = 60001\n", "tracing.timeout_ms", "more than the maximum, 60000"},
		{"an empty service name", table + "service_name = \" \"\n", "tracing.service_name", "must not be empty"},
		{"a service name too long", table + "service_name = \"" + strings.Repeat("s", MaxTracingServiceNameBytes+1) + "\"\n", "tracing.service_name", "longer than 128"},
		{"a service name with a control character", table + "service_name = \"a\\u0007b\"\n", "tracing.service_name", "printable ASCII"},
		{"a CA file for an http endpoint", table + "ca_file = \"" + f.ca + "\"\n", "tracing.ca_file", "needs an https"},
		{"a CA file that does not exist", "[tracing]\nendpoint = \"https://otel:4318\"\nca_file = \"" + filepath.Join(f.dir, "nope") + "\"\n", "tracing.ca_file", "no such file"},
		{"a CA file without a certificate", "[tracing]\nendpoint = \"https://otel:4318\"\nca_file = \"" + good + "\"\n", "tracing.ca_file", "no PEM certificate"},
		{"a headers file that does not exist", table + "headers_file = \"" + filepath.Join(f.dir, "nope") + "\"\n", "tracing.headers_file", "no such file"},
		{"a headers file that is a directory", table + "headers_file = \"" + f.dir + "\"\n", "tracing.headers_file", "a directory"},
		{"a header line without a colon", table + "headers_file = \"" + headers("nocolon", "Authorization Bearer x\n") + "\"\n", "tracing.headers_file", "line 1: is not `Name: value`"},
		{"a header name with a space", table + "headers_file = \"" + headers("space", "X-A: 1\nAuthorization : x\n") + "\"\n", "tracing.headers_file", "line 2: the header name must be a token"},
		{"a header value with a CR", table + "headers_file = \"" + headers("cr", "X-A: a\rb\n") + "\"\n", "tracing.headers_file", "no CR, LF"},
		{"a header value with a NUL", table + "headers_file = \"" + headers("nul", "X-A: a\x00b\n") + "\"\n", "tracing.headers_file", "control character"},
		{"an empty header value", table + "headers_file = \"" + headers("empty", "X-A:  \n") + "\"\n", "tracing.headers_file", "the value is empty"},
		{"a header the exporter sets", table + "headers_file = \"" + headers("ct", "content-type: text/plain\n") + "\"\n", "tracing.headers_file", "set by the exporter"},
		{"a baggage header", table + "headers_file = \"" + headers("bag", "Baggage: a=b\n") + "\"\n", "tracing.headers_file", "set by the exporter"},
		{"too many headers", table + "headers_file = \"" + many + "\"\n", "tracing.headers_file", "more than 32 headers"},
		{"a headers file too large", table + "headers_file = \"" + headers("large", strings.Repeat("#", MaxTracingHeadersFileBytes+1)) + "\"\n", "tracing.headers_file", "larger than"},
		{"an unknown key", table + "protocol = \"grpc\"\n", "tracing.protocol", "unknown key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseDoc([]byte(tc.doc), "t.toml", Options{})
			if tc.wantKey == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if c.Tracing.ServiceName == "" {
					t.Errorf("service_name default not applied: %+v", c.Tracing)
				}
				return
			}
			var ps *Problems
			if !errors.As(err, &ps) {
				t.Fatalf("err = %v, want the problems", err)
			}
			for _, p := range ps.List {
				if p.Key == tc.wantKey && strings.Contains(p.Message, tc.wantMsg) {
					if strings.Contains(p.Message, "Bearer abc") {
						t.Fatalf("a problem repeats a header's value: %v", p)
					}
					return
				}
			}
			t.Fatalf("no problem of %s saying %q in %v", tc.wantKey, tc.wantMsg, ps)
		})
	}
}

func TestTheTracingDefaults(t *testing.T) {
	c, err := parseDoc([]byte("[tracing]\nendpoint = \"http://otel:4318/\"\n"), "t.toml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := c.Tracing
	if tr.ServiceName != "ferrofed" || tr.Ratio() != 1 || tr.Timeout() != 5*time.Second || tr.TracesURL() != "http://otel:4318/v1/traces" {
		t.Errorf("tracing = %+v, ratio %v, timeout %s, url %s", tr, tr.Ratio(), tr.Timeout(), tr.TracesURL())
	}
	c, err = parseDoc([]byte("[server]\n"), "t.toml", Options{})
	if err != nil || c.Tracing != nil {
		t.Fatalf("an absent [tracing] decoded as %+v (%v)", c.Tracing, err)
	}
	// The webhook checks a configuration for another machine: no file is read.
	if _, err := parseDoc([]byte("[tracing]\nendpoint = \"https://otel:4318\"\nheaders_file = \"/nonexistent\"\nca_file = \"/nonexistent\"\n"), "t.toml", Options{SkipFiles: true}); err != nil {
		t.Fatalf("SkipFiles read a file: %v", err)
	}
}

func TestReadTracingHeaders(t *testing.T) {
	p := filepath.Join(t.TempDir(), "h")
	if err := os.WriteFile(p, []byte("Authorization:Bearer a b\t\r\n# c\nx-b: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hs, err := ReadTracingHeaders("tracing.headers_file", p)
	if err != nil || len(hs) != 2 || hs[0] != (Header{"Authorization", "Bearer a b"}) || hs[1] != (Header{"x-b", "2"}) {
		t.Fatalf("headers %q, %v", hs, err)
	}
}
