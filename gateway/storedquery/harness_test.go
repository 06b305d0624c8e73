package storedquery_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferrofed/ferrofed/gateway/auth"
	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/server"
	"github.com/ferrofed/ferrofed/gateway/storedquery"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

const (
	issuer   = "https://issuer.test"
	audience = "ferrofed"
	scope    = "ferrofed.operator"
)

// gateway is a real gateway on loopback built as assemble builds it, with the
// federation surface and the stored queries over the members given.
type gateway struct {
	t       testing.TB
	url     string
	token   string // operator token with the scope
	noScope string // operator token without it
	queries *storedquery.Queries
	fed     *federation.Surface
	cancel  context.CancelFunc
	done    chan error
}

// keys signs the operator tokens of every gateway of a test.
type keys struct {
	key  *ecdsa.PrivateKey
	jwks string
}

func newKeys(t testing.TB) keys {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Use: "sig"}}})
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, set, 0o600); err != nil {
		t.Fatal(err)
	}
	return keys{key: key, jwks: jwks}
}

func (k keys) sign(t testing.TB, sub, scope string) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: k.key, KeyID: "k1"}}, nil)
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

// startGateway starts a gateway over ms (member ids are their Opts.ID) with the store
// dir and a drift interval of 1 s.
func startGateway(t testing.TB, k keys, dir string, ms ...*members.Server) *gateway {
	t.Helper()
	return startAudited(t, k, dir, nil, ms...)
}

// startAudited is startGateway with rec as the audit trail (nil: none).
func startAudited(t testing.TB, k keys, dir string, rec bindings.Recorder, ms ...*members.Server) *gateway {
	t.Helper()
	return startWith(t, k, dir, "", func(*config.Config) bindings.Recorder { return rec }, ms...)
}

// startWith is startGateway with the tables extra added to the configuration and the
// audit trail mkRec builds from it.
func startWith(t testing.TB, k keys, dir, extra string, mkRec func(*config.Config) bindings.Recorder, ms ...*members.Server) *gateway {
	t.Helper()
	g := &gateway{t: t, done: make(chan error, 1), token: k.sign(t, "alice", scope), noScope: k.sign(t, "bob", "other")}
	doc := "[server]\nlisten = \"127.0.0.1:0\"\ntermination_message_path = \"\"\nbindings_drain_timeout_ms = 2000\n"
	for _, m := range ms {
		doc += fmt.Sprintf("[[registry.members]]\nid = %q\nquery_endpoint = %q\n", m.Opts.ID, m.URL)
	}
	doc += fmt.Sprintf("[[auth.issuers]]\nissuer = %q\naudience = %q\njwks_file = %q\noperator_scope = %q\n", issuer, audience, k.jwks, scope)
	doc += fmt.Sprintf("[stored_queries]\ndir = %q\ndrift_interval_ms = 1000\n", dir)
	doc += extra
	cfg, err := config.Parse([]byte(doc), "test.toml", config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := logr.Discard()
	// The same parts, in the same order, as assemble.
	rec := mkRec(cfg)
	tracker := dependencies.NewTracker()
	operators, err := auth.NewOperators(cfg.Auth.Issuers, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x, err := storedquery.Load(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	g.fed, err = federation.New(cfg, federation.Options{Logger: log, StoredQueries: x, Tracker: tracker, Operators: operators})
	if err != nil {
		t.Fatal(err)
	}
	g.queries, err = storedquery.New(cfg, x, storedquery.Options{Logger: log, Recorder: rec, Members: g.fed, Authorize: operators.Middleware()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, log, server.WithRegistrations(
		server.Registration{Name: "federation", DataPlane: g.fed.RegisterDataPlane, Operator: g.fed.RegisterOperator, Checks: g.fed.Checks(),
			Stop: g.fed.Stop, Reload: g.fed.PrepareReload, Collectors: []prometheus.Collector{tracker.Collector()}},
		server.Registration{Name: "stored_queries", Operator: g.queries.RegisterOperator, Checks: g.queries.Checks(),
			Stop: g.queries.Stop, Reload: g.queries.PrepareReload},
	), server.WithBootPoll(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	g.queries.Start()
	g.url = srv.URL()
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	go func() { g.done <- srv.Run(ctx) }()
	t.Cleanup(g.stop)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if status, _ := g.do(http.MethodGet, "/health/readiness", "", nil); status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the gateway did not become ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return g
}

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

// do sends one request; token "" sends none.
func (g *gateway) do(method, path, token string, body []byte) (int, []byte) {
	g.t.Helper()
	req, err := http.NewRequest(method, g.url+path, bytes.NewReader(body))
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
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// report is the dependency report's endpoints.
func (g *gateway) endpoints() map[string]string {
	g.t.Helper()
	status, body := g.do(http.MethodGet, "/operator/dependencies", g.token, nil)
	if status != http.StatusOK {
		g.t.Fatalf("dependencies: %d %s", status, body)
	}
	var r struct {
		Endpoints map[string]string `json:"endpoints"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		g.t.Fatal(err)
	}
	return r.Endpoints
}

// definition is a stored query of id and code over Observation, with the template
// given.
func definition(id, code, template string) []byte {
	b, _ := json.Marshal(map[string]any{
		"resourceType": "OperationDefinition",
		"id":           id,
		"url":          "https://example.org/fhir/OperationDefinition/" + id,
		"version":      "1",
		"name":         "StoredQuery",
		"status":       "active",
		"kind":         "query",
		"code":         code,
		"system":       false,
		"type":         true,
		"instance":     false,
		"resource":     []string{"Observation"},
		"parameter": []map[string]any{
			{"name": "patient", "use": "in", "min": 1, "max": "1", "type": "string"},
			{"name": "code", "use": "in", "min": 0, "max": "1", "type": "string"},
		},
		"extension": []map[string]any{{
			"url": storedquery.TemplateExtension,
			"valueExpression": map[string]any{
				"language":   storedquery.TemplateLanguage,
				"expression": template,
			},
		}},
	})
	return b
}

const highRisk = "Observation?subject=Patient/{{%patient}}&code={{%code}}&status=final"
