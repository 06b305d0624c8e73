// Package gatewaytest starts a whole gateway for a test, as Kubernetes' StartTestServer
// starts an API server: built from a configuration by the composition root,
// gateway/assemble (the function `ferrofed serve` calls), listening on loopback, started,
// ready, and drained when the test ends (docs/architecture.md).
package gatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/ferrofed/ferrofed/gateway/assemble"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/server"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/gatewaytest/mount"
)

// Gateway is a running gateway.
type Gateway struct {
	t testing.TB
	// URL is the server's base URL, its base path included.
	URL string
	// Issuer signs the tokens the gateway trusts; Token is one of its operator tokens,
	// Client one of its data-plane tokens (issuer.ClientScope).
	Issuer *issuer.Issuer
	Token  string
	Client string
	// Config is the configuration it runs.
	Config *config.Config
	// Server is the running server.
	Server *server.Server
	// Assembled is the gateway as the composition root built it.
	Assembled *assemble.Gateway

	cancel context.CancelFunc
	done   chan error
}

type options struct {
	server     string
	issuer     *issuer.Issuer
	issuerKeys string
	noIssuers  bool
	log        logr.Logger
	parts      []assemble.Option
}

// Option tunes Start and Mounted.
type Option func(*options)

// WithServer adds keys to the [server] table (base_path, budgets); Start writes listen
// = "127.0.0.1:0", termination_message_path = "" and bindings_drain_timeout_ms = 2000
// unless given.
func WithServer(keys string) Option { return func(o *options) { o.server = keys } }

// WithIssuer trusts is instead of a new issuer (gateways of one test sharing tokens).
func WithIssuer(is *issuer.Issuer) Option { return func(o *options) { o.issuer = is } }

// WithIssuerKeys adds keys to the issuer's [[auth.issuers]] table (its endpoints, which
// SMART discovery publishes).
func WithIssuerKeys(keys string) Option { return func(o *options) { o.issuerKeys = keys } }

// WithoutIssuers leaves the [[auth.issuers]] table out: the gateway trusts no issuer,
// and Issuer and Token are of one it does not trust. Its data plane is then written
// open (a required one needs an issuer), unless tables say otherwise.
func WithoutIssuers() Option { return func(o *options) { o.noIssuers = true } }

// WithLog gives the gateway a logger; default none.
func WithLog(log logr.Logger) Option { return func(o *options) { o.log = log } }

// WithAssemble passes opts to assemble.New: what a test injects into the production
// wiring (a recorder that refuses, a spool file system that fails, shorter intervals).
func WithAssemble(opts ...assemble.Option) Option {
	return func(o *options) { o.parts = append(o.parts, opts...) }
}

func apply(opts []Option) options {
	o := options{log: logr.Discard()}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Config parses tables into a configuration with a [server] table listening on
// loopback and the [[auth.issuers]] table of the issuer of opts (a new one by default;
// none WithoutIssuers), which it returns.
func Config(t testing.TB, tables string, opts ...Option) (*config.Config, *issuer.Issuer) {
	t.Helper()
	o := apply(opts)
	if o.issuer == nil {
		o.issuer = issuer.New(t)
	}
	doc := "[server]\nlisten = \"127.0.0.1:0\"\n" + o.server + "\n"
	if !bytes.Contains([]byte(o.server), []byte("termination_message_path")) {
		doc += "termination_message_path = \"\"\n"
	}
	if !bytes.Contains([]byte(o.server), []byte("bindings_drain_timeout_ms")) {
		doc += "bindings_drain_timeout_ms = 2000\n"
	}
	if !o.noIssuers {
		doc += o.issuer.Table() + o.issuerKeys + "\n"
	} else if !strings.Contains(tables, "data_plane") {
		doc += "[auth]\ndata_plane = \"open\"\n"
	}
	doc += tables
	cfg, err := config.Parse([]byte(doc), "test.toml", config.Options{})
	if err != nil {
		t.Fatalf("the test's configuration: %v\n%s", err, doc)
	}
	return cfg, o.issuer
}

// Start builds the gateway of tables (plus the [server] and [[auth.issuers]] tables of
// Config) with assemble.New, listens, starts it and waits until it is ready; the
// test's end drains it.
func Start(t testing.TB, tables string, opts ...Option) *Gateway {
	t.Helper()
	cfg, is, a := build(t, tables, opts)
	g := serve(t, cfg, is, a.Server, a.Start)
	g.Assembled = a
	return g
}

// Mounted builds the gateway of tables with assemble.New, as Start does, and mounts
// its parts without the server (test/gatewaytest/mount) and without starting them: for the tests that
// search and read the report before the parts are ready (the server's gate would
// refuse them) and run each refresh by hand.
func Mounted(t testing.TB, tables string, opts ...Option) *Gateway {
	t.Helper()
	cfg, is, a := build(t, tables, opts)
	g := mounted(t, cfg, is, a.Registrations()...)
	g.Assembled = a
	return g
}

func build(t testing.TB, tables string, opts []Option) (*config.Config, *issuer.Issuer, *assemble.Gateway) {
	t.Helper()
	cfg, is := Config(t, tables, opts...)
	o := apply(opts)
	// Readiness is polled every 10 ms while booting, so that a test waits for the
	// gateway no longer than its parts take.
	parts := append([]assemble.Option{assemble.WithServerOptions(server.WithBootPoll(10 * time.Millisecond))}, o.parts...)
	a, err := assemble.New(cfg, o.log, parts...)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, is, a
}

// Serve runs the server of a Mounted gateway too, over the same parts, starts the
// parts' processes as Start does, and returns the served gateway once it is ready; the
// test's end drains it. The two share every part: a member one of them saw up is up
// for both (for the tests that use a member before health.member_ready_check lets the
// server's gate open, then what only the server bounds).
func (g *Gateway) Serve() *Gateway {
	g.t.Helper()
	s := serve(g.t, g.Config, g.Issuer, g.Assembled.Server, g.Assembled.Start)
	s.Assembled = g.Assembled
	return s
}

// Part is what the part name ("federation", "bindings", "audit", …) registered with
// the server.
func (g *Gateway) Part(name string) server.Registration {
	g.t.Helper()
	for _, p := range g.Assembled.Registrations() {
		if p.Name == name {
			return p
		}
	}
	g.t.Fatalf("the gateway has no part %q", name)
	return server.Registration{}
}

// Check runs the gateway's readiness check name once, as the server would.
func (g *Gateway) Check(name string) error {
	g.t.Helper()
	for _, p := range g.Assembled.Registrations() {
		for _, c := range p.Checks {
			if c.Name() == name {
				return c.Check(context.Background())
			}
		}
	}
	g.t.Fatalf("the gateway has no readiness check %q", name)
	return nil
}

// Reload applies cfg to every part as the server's reload does: each part prepares
// it, in order, and only once all prepared is each applied.
func (g *Gateway) Reload(cfg *config.Config) error {
	var applies []func()
	for _, p := range g.Assembled.Registrations() {
		if p.Reload == nil {
			continue
		}
		apply, err := p.Reload(cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		applies = append(applies, apply)
	}
	for _, apply := range applies {
		apply()
	}
	return nil
}

// mounted serves parts on loopback without the server (mount.Serve).
func mounted(t testing.TB, cfg *config.Config, is *issuer.Issuer, parts ...server.Registration) *Gateway {
	t.Helper()
	hs := mount.Serve(t, cfg, parts...)
	base := cfg.Server.BasePath
	if base == "/" {
		base = ""
	}
	return &Gateway{t: t, URL: hs.URL + base, Issuer: is, Token: is.Operator(t), Client: is.Client(t), Config: cfg}
}

// serve listens with srv, calls start once it listens, runs it and waits until it is
// ready; the test's end drains it.
func serve(t testing.TB, cfg *config.Config, is *issuer.Issuer, srv *server.Server, start func() error) *Gateway {
	t.Helper()
	g := &Gateway{t: t, Issuer: is, Token: is.Operator(t), Client: is.Client(t), Config: cfg, Server: srv, done: make(chan error, 1)}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	g.URL = srv.URL()
	if start != nil {
		if err := start(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	go func() { g.done <- srv.Run(ctx) }()
	t.Cleanup(g.Stop)
	double.Eventually(t, "the gateway is ready", func() bool {
		res, err := g.Get("/health/readiness")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return g
}

// Stop drains the gateway (step 4 stops the bindings) and waits for it; the test's end
// calls it too.
func (g *Gateway) Stop() {
	if g.cancel == nil {
		return
	}
	g.cancel()
	g.cancel = nil
	select {
	case err := <-g.done:
		if err != nil {
			g.t.Errorf("the gateway stopped with %v", err)
		}
	case <-time.After(20 * time.Second):
		g.t.Error("the gateway did not finish its drain")
	}
}

// Send sends req to the gateway and returns the answer, its body unread. Every request
// a test sends to a gateway goes through it (Request, Do and Get do, and the packages'
// harnesses), so that what the gateway comes to require of every request is added
// here, once: a request to the data plane's FHIR APIs ({base}/fhir, {base}/nodes)
// without an Authorization header of its own carries the Client token, as a client of
// a required data plane does.
func (g *Gateway) Send(req *http.Request) (*http.Response, error) {
	if rest, ok := strings.CutPrefix(req.URL.String(), g.URL); ok && req.Header.Get("Authorization") == "" &&
		(strings.HasPrefix(rest, "/fhir") || strings.HasPrefix(rest, "/nodes")) {
		req.Header.Set("Authorization", "Bearer "+g.Client)
	}
	return http.DefaultClient.Do(req)
}

// Do sends one request to URL+path, with a FHIR JSON body when body is not nil;
// token "" sends none of its own (Send gives a data-plane request the Client token).
// It returns the status and the body.
func (g *Gateway) Do(method, path, token string, body []byte) (int, []byte) {
	g.t.Helper()
	res, b := g.Request(method, path, token, body)
	return res.StatusCode, b
}

// Get sends GET URL+path, as Send does, and returns the response, its body unread:
// for the tests that stream or time an answer.
func (g *Gateway) Get(path string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, g.URL+path, nil)
	if err != nil {
		return nil, err
	}
	return g.Send(req)
}

// Reply is what a test reads of an answer besides its body: Request reads and closes
// the body where it obtains the response.
type Reply struct {
	StatusCode int
	Header     http.Header
}

// Request is Do returning the status and the header of the answer too.
func (g *Gateway) Request(method, path, token string, body []byte) (*Reply, []byte) {
	g.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, g.URL+path, rd)
	if err != nil {
		g.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Accept", "application/fhir+json")
	if body != nil {
		req.Header.Set("Content-Type", "application/fhir+json")
	}
	res, err := g.Send(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	return &Reply{StatusCode: res.StatusCode, Header: res.Header}, b
}

// Report is the dependency report (GET {base}/operator/dependencies with the
// operator token), decoded and raw.
func (g *Gateway) Report() (map[string]any, string) {
	g.t.Helper()
	status, body := g.Do(http.MethodGet, "/operator/dependencies", g.Token, nil)
	if status != http.StatusOK {
		g.t.Fatalf("the dependency report answered %d: %s", status, body)
	}
	var r map[string]any
	if err := json.Unmarshal(body, &r); err != nil {
		g.t.Fatal(err)
	}
	return r, string(body)
}

// State is the dependency report's value of key, "absent" when it has none.
func (g *Gateway) State(key string) string {
	g.t.Helper()
	r, _ := g.Report()
	v, ok := r[key]
	if !ok {
		return "absent"
	}
	s, _ := v.(string)
	return s
}

// States is the dependency report flattened: each key's state, the endpoints' as
// "endpoints.<id>"; and the raw report.
func (g *Gateway) States() (map[string]string, []byte) {
	g.t.Helper()
	r, raw := g.Report()
	out := map[string]string{}
	for k, v := range r {
		if eps, ok := v.(map[string]any); ok && k == "endpoints" {
			for id, s := range eps {
				out["endpoints."+id], _ = s.(string)
			}
			continue
		}
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out, []byte(raw)
}

// Endpoints is the report's endpoints: each member's state.
func (g *Gateway) Endpoints() map[string]string {
	g.t.Helper()
	r, _ := g.Report()
	eps, _ := r["endpoints"].(map[string]any)
	out := map[string]string{}
	for id, s := range eps {
		out[id], _ = s.(string)
	}
	return out
}
