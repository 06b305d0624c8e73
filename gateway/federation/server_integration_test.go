package federation_test

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
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferrofed/ferrofed/gateway/auth"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/server"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
)

// The surface's methods are the hooks of its server registration, reloads included.
var _ = func(s *federation.Surface) server.Registration {
	return server.Registration{DataPlane: s.RegisterDataPlane, Operator: s.RegisterOperator, Checks: s.Checks(), Stop: s.Stop, Reload: s.PrepareReload}
}

func TestTheSurfaceServesInsideTheServer(t *testing.T) {
	if err := fhirschema.Warm(); err != nil { // not within the timed search below
		t.Fatal(err)
	}
	ok := members.Start(t, members.Options{ID: "node-a", Entries: 2})
	hang := members.Start(t, members.Options{ID: "node-b", Knobs: double.Knobs{Fault: double.FaultHang}})

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Use: "sig"}}})
	jwksFile := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwksFile, set, 0o600); err != nil {
		t.Fatal(err)
	}
	const requestTimeout = 500 * time.Millisecond
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
[server]
listen = "127.0.0.1:0"
termination_message_path = ""
base_path = "/api"
request_timeout_ms = %d

[[registry.members]]
id = "node-a"
query_endpoint = %q

[[registry.members]]
id = "node-b"
query_endpoint = %q

[[auth.issuers]]
issuer = "https://issuer.test"
audience = "ferrofed"
jwks_file = %q
operator_scope = "ferrofed.operator"
`, requestTimeout.Milliseconds(), ok.URL, hang.URL, jwksFile)), "test.toml", config.Options{})
	if err != nil {
		t.Fatal(err)
	}

	tracker := dependencies.NewTracker()
	operators, err := auth.NewOperators(cfg.Auth.Issuers, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	surface, err := federation.New(cfg, federation.Options{Tracker: tracker, Operators: operators})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, logr.Discard(), server.WithRegistrations(server.Registration{Name: "federation",
		DataPlane: surface.RegisterDataPlane, Operator: surface.RegisterOperator, Checks: surface.Checks(), Stop: surface.Stop,
		Reload: surface.PrepareReload, Collectors: []prometheus.Collector{tracker.Collector()}}))
	if err != nil {
		t.Fatal(err)
	}
	// The server registers the collectors a registration carries; registering the
	// dependency states here too is refused as a duplicate, which is fine.
	var dup prometheus.AlreadyRegisteredError
	if err := srv.Metrics().Registry.Register(tracker.Collector()); err != nil && !errors.As(err, &dup) {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("the server did not stop")
		}
	}()
	base := srv.URL()

	get := func(method, path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		// Every FHIR answer of the gateway is valid R4 but for meta.federation.
		if res.Header.Get("Content-Type") == fhir.MediaType {
			if err := fhirschema.ValidateFederated(body); err != nil {
				t.Errorf("%s %s: not valid R4: %v", method, path, err)
			}
		}
		return res.StatusCode, string(body)
	}

	deadline := time.Now().Add(5 * time.Second)
	for {
		status, body := get(http.MethodGet, "/health/readiness", "")
		if status == 200 {
			if !strings.Contains(body, `"registry":"ok"`) || !strings.Contains(body, `"clients":"ok"`) || strings.Contains(body, `"members"`) {
				t.Fatalf("readiness %s", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %d %s", status, body)
		}
		time.Sleep(20 * time.Millisecond)
	}

	start := time.Now()
	status, body := get(http.MethodGet, "/fhir/Patient?name=x", "")
	if status != 200 || time.Since(start) > requestTimeout+time.Second {
		t.Fatalf("search: %d after %v: %s", status, time.Since(start), body)
	}
	for _, want := range []string{`{"id":"node-a","outcome":"ok","status":200,"entries":2`, `{"id":"node-b","outcome":"timeout","entries":0`} {
		if !strings.Contains(body, want) {
			t.Fatalf("search answer lacks %s: %s", want, body)
		}
	}
	if status, body := get(http.MethodGet, "/nodes/node-a/fhir/Patient/node-a-1", ""); status != 200 || !strings.Contains(body, `"id":"node-a-1"`) {
		t.Fatalf("routed: %d %s", status, body)
	}
	if status, _ := get(http.MethodGet, "/operator/dependencies", ""); status != 401 {
		t.Fatalf("the report without a token answered %d", status)
	}
	token := sign(t, key)
	if status, body := get(http.MethodGet, "/operator/dependencies", token); status != 200 || body != `{"endpoints":{"node-a-query":"up","node-b-query":"down"}}` {
		t.Fatalf("report: %d %s", status, body)
	}
	if _, body := get(http.MethodGet, "/metrics", ""); !strings.Contains(body, `ferrofed_dependency_state{dependency="member",endpoint="node-b-query",state="down"} 1`) {
		t.Fatalf("the metric is not served")
	}
	// A member's outage never made the gateway unready.
	if status, body := get(http.MethodGet, "/health/readiness", ""); status != 200 {
		t.Fatalf("readiness after a member outage: %d %s", status, body)
	}
}

func sign(t *testing.T, key *ecdsa.PrivateKey) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(map[string]any{
		"iss": "https://issuer.test", "aud": "ferrofed", "exp": time.Now().Add(time.Hour).Unix(), "scope": "ferrofed.operator",
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
