package audit_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferrofed/ferrofed/gateway/auth"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit/spool"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/server"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

const (
	issuer   = "https://issuer.test"
	audience = "ferrofed"
	scope    = "ferrofed.operator"
	// waitAfter is the tests' delivery interval: a record older than it waits.
	waitAfter = 300 * time.Millisecond
)

// gateway is a real gateway on loopback: the server with the federation surface and
// the audit trail, as assemble builds them, one member and an audit repository.
type gateway struct {
	t      testing.TB
	url    string
	token  string // operator token with the scope
	noScop string // operator token without it
	arr    *auditrepo.Server
	feed   *auditrepo.Server // the [audit.feed] repository, %FEED%
	member *members.Server
	trail  *audit.Trail
	srv    *server.Server
	cancel context.CancelFunc
	done   chan error
}

type harnessOptions struct {
	// audit is the [audit] table's body after `[audit]`; "" for no table. %ARR% and
	// %SPOOL% are replaced.
	audit string
	// spoolDir is the spool directory; default a new one.
	spoolDir string
	// arr is the repository; default a new one.
	arr *auditrepo.Server
	// arrURL, when set, replaces %ARR% instead of arr's URL (another repository).
	arrURL string
	// fs is the spools' file system; default the OS's.
	fs spool.FS
	// log receives the gateway's log.
	log logr.Logger
	// server is added to the [server] table (budgets, termination_message_path).
	server string
	// memberDelay is how long the member waits before each answer (a member across a
	// network); default none.
	memberDelay time.Duration
	// members is how many members the gateway federates (a, b, c, …), each with
	// memberDelay; default 1.
	members int
	// waitAfter is the delivery interval; default the tests' short one. The delivery
	// linger is a tenth of it, at most 50 ms (production's).
	waitAfter time.Duration
}

const repositoryTable = "destination = \"repository\"\nurl = \"%ARR%\"\nspool_dir = \"%SPOOL%\"\n"

func startGateway(t testing.TB, o harnessOptions) *gateway {
	t.Helper()
	g := &gateway{t: t, arr: o.arr, member: members.Start(t, members.Options{ID: "a", Knobs: double.Knobs{Delay: o.memberDelay}}), done: make(chan error, 1)}
	if g.arr == nil {
		g.arr = auditrepo.Start(t, auditrepo.Options{PoisonMarker: "POISON"})
	}
	g.feed = auditrepo.Start(t, auditrepo.Options{})
	if o.spoolDir == "" {
		o.spoolDir = t.TempDir()
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Use: "sig"}}})
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, set, 0o600); err != nil {
		t.Fatal(err)
	}
	g.token = sign(t, key, "alice", scope)
	g.noScop = sign(t, key, "bob", "other")
	if o.server == "" {
		o.server = "bindings_drain_timeout_ms = 2000\ntermination_message_path = \"\"\n"
	}
	doc := fmt.Sprintf("[server]\nlisten = \"127.0.0.1:0\"\n"+o.server+
		"[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n",
		g.member.URL)
	for i := 1; i < o.members; i++ {
		id := string(rune('a' + i))
		m := members.Start(t, members.Options{ID: id, Knobs: double.Knobs{Delay: o.memberDelay}})
		doc += fmt.Sprintf("[[registry.members]]\nid = %q\nquery_endpoint = %q\n", id, m.URL)
	}
	doc += fmt.Sprintf("[[auth.issuers]]\nissuer = %q\naudience = %q\njwks_file = %q\noperator_scope = %q\n",
		issuer, audience, jwks, scope)
	if o.audit != "" {
		arrURL := g.arr.URL
		if o.arrURL != "" {
			arrURL = o.arrURL
		}
		doc += "[audit]\n" + strings.NewReplacer("%ARR%", arrURL, "%FEED%", g.feed.URL, "%SPOOL%", o.spoolDir).Replace(o.audit)
	}
	cfg, err := config.Parse([]byte(doc), "test.toml", config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := o.log
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	// The same parts, in the same order, as assemble; the delivery interval and the
	// backoff are shortened.
	if o.waitAfter == 0 {
		o.waitAfter = waitAfter
	}
	tracker := dependencies.NewTracker()
	operators, err := auth.NewOperators(cfg.Auth.Issuers, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g.trail, err = audit.New(cfg, audit.Options{Logger: log, FS: o.fs, WaitAfter: o.waitAfter, BackoffBase: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
		Tracker: tracker, Authorize: operators.Middleware()})
	if err != nil {
		t.Fatal(err)
	}
	fo := federation.Options{Logger: log, Tracker: tracker, Operators: operators}
	if g.trail != nil {
		fo.Audit = g.trail
	}
	fed, err := federation.New(cfg, fo)
	if err != nil {
		t.Fatal(err)
	}
	parts := []server.Registration{{Name: "federation", DataPlane: fed.RegisterDataPlane, Operator: fed.RegisterOperator, Checks: fed.Checks(),
		Stop: fed.Stop, Reload: fed.PrepareReload, Collectors: []prometheus.Collector{tracker.Collector()}}}
	if g.trail != nil {
		parts = append(parts, server.Registration{Name: "audit", Operator: g.trail.RegisterOperator, Reload: g.trail.PrepareReload,
			Collectors: []prometheus.Collector{g.trail.Collector()}})
		for _, s := range g.trail.Stoppers() {
			parts = append(parts, server.Registration{Name: s.Name, Stop: s.Stop, StopReport: s.Report})
		}
	}
	g.srv, err = server.New(cfg, log, server.WithRegistrations(parts...), server.WithBootPoll(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.srv.Listen(); err != nil {
		t.Fatal(err)
	}
	if g.trail != nil {
		if err := g.trail.Start(); err != nil {
			t.Fatal(err)
		}
	}
	g.url = g.srv.URL()
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	go func() { g.done <- g.srv.Run(ctx) }()
	t.Cleanup(g.stop)
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

// stop drains the gateway (step 4 closes the spools) and waits for it.
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
func (g *gateway) do(method, path, token string) (int, []byte) {
	g.t.Helper()
	req, err := http.NewRequest(method, g.url+path, nil)
	if err != nil {
		g.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Accept", "application/fhir+json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, body
}

// search is one federated search carrying marker in its query.
func (g *gateway) search(marker string) int {
	g.t.Helper()
	status, _ := g.do(http.MethodGet, "/fhir/Patient?name="+url.QueryEscape(marker), "")
	return status
}

// report is GET {base}/operator/dependencies.
func (g *gateway) report() map[string]any {
	g.t.Helper()
	status, body := g.do(http.MethodGet, "/operator/dependencies", g.token)
	if status != http.StatusOK {
		g.t.Fatalf("dependencies answered %d: %s", status, body)
	}
	var r map[string]any
	if err := json.Unmarshal(body, &r); err != nil {
		g.t.Fatal(err)
	}
	return r
}

// state is the report's value of key, "absent" when it has none.
func (g *gateway) state(key string) string {
	v, ok := g.report()[key]
	if !ok {
		return "absent"
	}
	s, _ := v.(string)
	return s
}

// eventually polls cond every 10 ms for at most 15 s (a bound, not a timing claim).
func (g *gateway) eventually(what string, cond func() bool) {
	g.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			g.t.Fatalf("never: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// delivered counts the repository's stored events whose decoded query holds marker.
func delivered(arr *auditrepo.Server, marker string) int {
	n := 0
	for _, e := range arr.Received() {
		for _, q := range e.Queries {
			if strings.Contains(q, marker) {
				n++
				break
			}
		}
	}
	return n
}
