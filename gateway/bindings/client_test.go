package bindings

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
)

func TestOutcome(t *testing.T) {
	cases := []struct {
		answered bool
		status   int
		want     string
	}{
		{true, 201, OutcomeSuccess}, {true, 302, OutcomeRedirect}, {true, 404, OutcomeClientError},
		{true, 503, OutcomeServerError}, {false, 0, OutcomeNoAnswer},
	}
	for _, c := range cases {
		if got := Outcome(c.answered, c.status); got != c.want {
			t.Errorf("Outcome(%v, %d) = %s, want %s", c.answered, c.status, got, c.want)
		}
	}
}

// One real server on loopback answers by path; each row is one exchange of the
// binding's client and what it must observe.
func TestTheClientObservesEachExchange(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte(r.Header.Get("Authorization"))) //nolint:errcheck
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/missing":
			http.NotFound(w, r)
		case "/broken":
			w.WriteHeader(http.StatusBadGateway)
		case "/big":
			w.Write([]byte(strings.Repeat("x", 2048))) //nolint:errcheck
		case "/exact":
			w.Write([]byte(strings.Repeat("x", 1024))) //nolint:errcheck
		case "/slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(srv.Close)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	tr := dependencies.NewTracker()
	c, err := NewClient(ClientOptions{
		Name: "resolver", Table: "resolver", Timeout: 300 * time.Millisecond, MaxResponseBytes: 1024, Metrics: m,
		Tracker: tr, Rule: dependencies.FromHTTP, Credentials: config.Credentials{BearerTokenFile: tokenFile},
	})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string, error) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if err := c.Authorize(req); err != nil {
			t.Fatal(err)
		}
		resp, err := c.HTTP.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	cases := []struct {
		name      string
		path      string
		status    int
		wantErr   error
		anyErr    bool
		state     dependencies.State
		outcome   string
		beforeRun func()
	}{
		{name: "an answer carries the token of the file", path: "/ok", status: 200, state: dependencies.Up, outcome: OutcomeSuccess},
		{name: "a rotated token is sent from the next exchange on", path: "/ok", status: 200, state: dependencies.Up, outcome: OutcomeSuccess,
			beforeRun: func() { _ = os.WriteFile(tokenFile, []byte("second"), 0o600) }},
		{name: "a redirect is answered, never followed", path: "/redirect", status: 302, state: dependencies.Up, outcome: OutcomeRedirect},
		{name: "a 404 is up: the service answered", path: "/missing", status: 404, state: dependencies.Up, outcome: OutcomeClientError},
		{name: "a 5xx is failing", path: "/broken", status: 502, state: dependencies.Failing, outcome: OutcomeServerError},
		{name: "a body at the cap is read whole", path: "/exact", status: 200, state: dependencies.Up, outcome: OutcomeSuccess},
		{name: "a body past the cap is an error", path: "/big", status: 200, wantErr: ErrResponseTooLarge, state: dependencies.Up, outcome: OutcomeSuccess},
		{name: "an exchange past the budget is down", path: "/slow", anyErr: true, state: dependencies.Down, outcome: OutcomeNoAnswer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.beforeRun != nil {
				tc.beforeRun()
			}
			before := testutil.ToFloat64(m.requests.WithLabelValues("resolver", tc.outcome))
			status, body, err := get(tc.path)
			switch {
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			case tc.anyErr && err == nil:
				t.Fatal("no error")
			case tc.wantErr == nil && !tc.anyErr && err != nil:
				t.Fatalf("error = %v", err)
			}
			if !tc.anyErr && status != tc.status {
				t.Fatalf("status = %d, want %d", status, tc.status)
			}
			if tc.path == "/ok" {
				want := "Bearer first"
				if tc.beforeRun != nil {
					want = "Bearer second"
				}
				if body != want {
					t.Fatalf("the server saw %q, want %q", body, want)
				}
			}
			if got := tr.Report().Services["resolver"]; got != tc.state {
				t.Fatalf("state = %s, want %s", got, tc.state)
			}
			if got := testutil.ToFloat64(m.requests.WithLabelValues("resolver", tc.outcome)); got != before+1 {
				t.Fatalf("requests_total{outcome=%s} = %v, want %v", tc.outcome, got, before+1)
			}
		})
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	if n, err := testutil.GatherAndCount(reg, "ferrofed_binding_request_duration_seconds"); err != nil || n != 1 {
		t.Fatalf("duration histogram: %d series, %v", n, err)
	}
}

func TestNewClientRefusesWhatItCannotUse(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		o    ClientOptions
		want string
	}{
		{"no name", ClientOptions{Table: "x"}, "name"},
		{"no table", ClientOptions{Name: "x"}, "configuration table"},
		{"a cap past the limit", ClientOptions{Name: "x", Table: "x", MaxResponseBytes: MaxResponseBytesLimit + 1}, "cap"},
		{"a missing token file", ClientOptions{Name: "x", Table: "t", Credentials: config.Credentials{BearerTokenFile: filepath.Join(dir, "none")}}, "t.bearer_token_file: open " + filepath.Join(dir, "none")},
		{"a missing certificate", ClientOptions{Name: "x", Table: "t", Credentials: config.Credentials{ClientCertificateFile: filepath.Join(dir, "c"), ClientKeyFile: filepath.Join(dir, "k")}}, "t.client_certificate_file: open"},
		// A named pipe with no writer would block the open forever: it is refused.
		{"a named pipe as the token file", ClientOptions{Name: "x", Table: "t", Credentials: config.Credentials{BearerTokenFile: fifo}}, "t.bearer_token_file: " + fifo + " is a named pipe"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewClient(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

type slowProcess struct{ release chan struct{} }

func (p slowProcess) Stop(ctx context.Context) error {
	<-p.release
	return ctx.Err()
}

func TestAStopperReturnsOnlyOnceItsProcessStopped(t *testing.T) {
	p := slowProcess{release: make(chan struct{})}
	s := Stopper{Name: "identity_registry", Stop: p.Stop}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	go func() { _ = s.Stop(ctx); close(done) }()
	<-ctx.Done()
	select {
	case <-done:
		t.Fatal("Stop returned while its process was still stopping: the server could not abandon it by name")
	case <-time.After(50 * time.Millisecond):
	}
	close(p.release)
	<-done
	// A stopper has no readiness check: a binding's outage shows in the dependency
	// report, never as an unready gateway.
	if s.Name != "identity_registry" {
		t.Fatalf("name %q", s.Name)
	}
}

// TestAFailureQuotesNoSecretOfTheService: what an answer's fault says (a parser's
// error may quote the answer) goes to the client and the log through gateway/scrub.
func TestAFailureQuotesNoSecretOfTheService(t *testing.T) {
	ex := Exchange{Sent: true, Answered: true, Status: 200}
	f := ex.FailureOf("resolver", `answered with "see https://pix.internal:8443/x?token=abc at 10.1.2.3, password=hunter2"`)
	if f.Diagnostics != `the resolver answered with "see [url] at [host], password=[redacted]"` {
		t.Fatalf("%q", f.Diagnostics)
	}
}
