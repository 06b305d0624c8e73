package pmir_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferrofed/ferrofed/gateway/auth"
	"github.com/ferrofed/ferrofed/gateway/bindings/pmir"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/server"
	"github.com/ferrofed/ferrofed/test/doubles/identityregistry"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

const (
	issuer    = "https://issuer.test"
	audience  = "ferrofed"
	opScope   = "ferrofed.operator"
	feedScope = "pmir.feed"
)

// recorder is the audit trail of the tests: it stores every event, or none while
// fail is set.
type recorder struct {
	fail   atomic.Bool
	mu     sync.Mutex
	events [][]byte
}

func (r *recorder) Record(_ context.Context, ev []byte) error {
	if r.fail.Load() {
		return errors.New("audit record not stored: spool full")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	return nil
}

func (r *recorder) count(substr string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if strings.Contains(string(e), substr) {
			n++
		}
	}
	return n
}

// logBuffer keeps the gateway's log lines.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.lines = append(b.lines, prefix+" "+args)
	}, funcr.Options{})
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// gateway is a real gateway on loopback with the federation surface and the identity
// feed, as assemble builds them, one member and a PMIR registry double.
type gateway struct {
	t           testing.TB
	url         string
	token       string // operator token
	feedToken   string // token with the feed scope only
	reg         *identityregistry.Server
	rec         *recorder
	log         *logBuffer
	invalidated atomic.Int64
	feed        *pmir.Feed
	srv         *server.Server
	cancel      context.CancelFunc
	done        chan error
}

type harnessOptions struct {
	// pmir is added to the [pmir] table (after url, endpoint, feed_scope and a
	// check interval of 100 ms).
	pmir string
	// noPMIR leaves the table out.
	noPMIR bool
	// reg is the registry; default a new one.
	reg *identityregistry.Server
	// server is added to the [server] table.
	server string
	// before runs before the feed starts (a leftover to find).
	before func(g *gateway)
}

func startGateway(t testing.TB, o harnessOptions) *gateway {
	t.Helper()
	g := &gateway{t: t, reg: o.reg, rec: &recorder{}, log: &logBuffer{}, done: make(chan error, 1)}
	if g.reg == nil {
		g.reg = identityregistry.Start(t, identityregistry.Options{})
	}
	member := members.Start(t, members.Options{ID: "a"})
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Use: "sig"}}})
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, set, 0o600); err != nil {
		t.Fatal(err)
	}
	g.token = sign(t, key, "alice", opScope)
	g.feedToken = sign(t, key, "registry", feedScope)
	if o.server == "" {
		o.server = "bindings_drain_timeout_ms = 2000\ntermination_message_path = \"\"\n"
	}
	doc := fmt.Sprintf("[server]\nlisten = \"127.0.0.1:0\"\nbase_path = \"/gw\"\n"+o.server+
		"[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n"+
		"[[auth.issuers]]\nissuer = %q\naudience = %q\njwks_file = %q\noperator_scope = %q\n",
		member.URL, issuer, audience, jwks, opScope)
	if !o.noPMIR {
		doc += fmt.Sprintf("[pmir]\nurl = %q\nendpoint = \"http://gateway.test/gw/pmir/$process-message\"\nfeed_scope = %q\ncheck_interval_ms = 100\n", g.reg.URL, feedScope) + o.pmir
	}
	cfg, err := config.Parse([]byte(doc), "test.toml", config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := g.log.logger()
	// The same parts, registered as assemble registers them.
	tracker := dependencies.NewTracker()
	operators, err := auth.NewOperators(cfg.Auth.Issuers, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fed, err := federation.New(cfg, federation.Options{Logger: log, Tracker: tracker, Operators: operators})
	if err != nil {
		t.Fatal(err)
	}
	parts := []server.Registration{{Name: "federation", DataPlane: fed.RegisterDataPlane, Operator: fed.RegisterOperator,
		Checks: fed.Checks(), Stop: fed.Stop, Reload: fed.PrepareReload, Collectors: []prometheus.Collector{tracker.Collector()}}}
	if cfg.PMIR != nil {
		g.feed, err = pmir.New(cfg, pmir.Options{Logger: log, Recorder: g.rec, Tracker: tracker, Invalidate: func() { g.invalidated.Add(1) }})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, server.Registration{Name: pmir.Key, DataPlane: g.feed.RegisterDataPlane, Stop: g.feed.Stop,
			StopReport: g.feed.StopReport, Reload: g.feed.PrepareReload})
	}
	g.srv, err = server.New(cfg, log, server.WithRegistrations(parts...), server.WithBootPoll(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.srv.Listen(); err != nil {
		t.Fatal(err)
	}
	g.url = g.srv.URL()
	if o.before != nil {
		o.before(g)
	}
	if g.feed != nil {
		if err := g.feed.Start(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	go func() { g.done <- g.srv.Run(ctx) }()
	t.Cleanup(func() {
		g.stop()
		if t.Failed() {
			t.Logf("the gateway's log:\n%s", g.log)
		}
	})
	g.eventually("the gateway is ready", func() bool {
		res, err := http.Get(g.url + "/health/readiness")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return g
}

// stop drains the gateway (step 4 deletes the subscription) and waits for it.
func (g *gateway) stop() {
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

func sign(t testing.TB, key *ecdsa.PrivateKey, sub, scope string) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(signer).Claims(map[string]any{
		"iss": issuer, "aud": audience, "sub": sub, "exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "scope": scope,
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// do sends one request; token "" sends none.
func (g *gateway) do(method, path, token string, body []byte) (int, []byte) {
	g.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequest(method, g.url+path, rd)
	if err != nil {
		g.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/fhir+json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// report is GET {base}/operator/dependencies.
func (g *gateway) report() (map[string]any, string) {
	g.t.Helper()
	status, body := g.do(http.MethodGet, "/operator/dependencies", g.token, nil)
	if status != http.StatusOK {
		g.t.Fatalf("dependencies answered %d: %s", status, body)
	}
	var r map[string]any
	if err := json.Unmarshal(body, &r); err != nil {
		g.t.Fatal(err)
	}
	return r, string(body)
}

// state is identity_registry and identity_registry_fault ("-" when absent), as
// "state/fault".
func (g *gateway) state() string {
	r, _ := g.report()
	s, ok := r["identity_registry"].(string)
	if !ok {
		s = "-"
	}
	f, ok := r["identity_registry_fault"].(string)
	if !ok {
		f = "-"
	}
	return s + "/" + f
}

// waitState waits until the report reads want.
func (g *gateway) waitState(want string) {
	g.t.Helper()
	last := ""
	g.eventually("identity_registry reads "+want, func() bool {
		last = g.state()
		return last == want
	}, func() string { return "last " + last })
}

// eventually polls cond every 10 ms for at most 15 s (a bound, not a timing claim).
func (g *gateway) eventually(what string, cond func() bool, detail ...func() string) {
	g.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			extra := ""
			for _, d := range detail {
				extra += " " + d()
			}
			g.t.Fatalf("never: %s%s", what, extra)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
