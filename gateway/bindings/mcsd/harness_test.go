package mcsd_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/ferrofed/ferrofed/gateway/auth"
	"github.com/ferrofed/ferrofed/gateway/bindings/mcsd"
	"github.com/ferrofed/ferrofed/gateway/bindings/patient"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/outbound"
	"github.com/ferrofed/ferrofed/test/doubles/mcsdsupplier"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

const (
	issuer   = "https://issuer.test"
	audience = "ferrofed"
	scope    = "ferrofed.operator"
	base     = "/api"
	// system is the member identifier system of the tests' directories.
	system = "urn:oid:1.3.6.1.4.1.21367.13.20.7000"
	// domainSystem is the system of the Organization identifier whose value is the
	// member's patient identifier domain (registry.mcsd.patient_domain_identifier_system).
	domainSystem = "https://ferrofed.example/patient-domain"
)

// domainOf is member id's patient identifier domain, as the directory gives it.
func domainOf(id string) string { return "urn:oid:1.3.6.1.4.1.21367.13.20." + oidArc(id) }

// communityOf is member id's home community id, as an OID (XCPD's root).
func communityOf(id string) string { return "1.3.6.1.4.1.21367.13.70." + oidArc(id) }

// oidArc is an OID arc of a member id: its bytes in decimal.
func oidArc(id string) string {
	var b strings.Builder
	for _, c := range []byte(id) {
		fmt.Fprintf(&b, "%d", c)
	}
	return b.String()
}

// gateway is the federation surface with its registry read from a directory double,
// mounted as the server mounts it, in front of real loopback members.
type gateway struct {
	t       testing.TB
	gw      *httptest.Server
	fed     *federation.Surface
	dir     *mcsd.Directory
	double  *mcsdsupplier.Server
	members map[string]*members.Server
	token   string
	rec     *recorder
	cfg     *config.Config
}

type gatewayOptions struct {
	// tables are more TOML, after [registry.mcsd].
	tables string
	// mcsd are more keys of [registry.mcsd].
	mcsd string
	// double is the directory; default a new one.
	double *mcsdsupplier.Server
	// limits are the directory's limits.
	limits mcsd.Limits
	// start runs the refresh loop (Start) instead of leaving refreshes to the test.
	start bool
}

// recorder keeps the AuditEvents of the exchanges.
type recorder struct {
	mu     sync.Mutex
	events [][]byte
	fail   bool
}

func (r *recorder) Record(_ context.Context, ev []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail {
		return fmt.Errorf("spool full")
	}
	r.events = append(r.events, ev)
	return nil
}

func (r *recorder) all() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func newGateway(t testing.TB, o gatewayOptions) *gateway {
	t.Helper()
	g := &gateway{t: t, members: map[string]*members.Server{}, double: o.double, rec: &recorder{}}
	if g.double == nil {
		g.double = mcsdsupplier.Start(t, mcsdsupplier.Options{})
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
	g.token = sign(t, key)
	doc := fmt.Sprintf(`[server]
listen = "127.0.0.1:0"
termination_message_path = ""
base_path = %q
request_timeout_ms = 5000
[[auth.issuers]]
issuer = %q
audience = %q
jwks_file = %q
operator_scope = %q
[registry.mcsd]
url = %q
member_identifier_system = %q
%s
%s`, base, issuer, audience, jwks, scope, g.double.URL, system, o.mcsd, o.tables)
	cfg, err := config.Parse([]byte(doc), "test.toml", config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g.cfg = cfg
	// The patient-scoped flow, when the tables configure one (nil otherwise), built
	// as assemble builds it: a directory's registry gives it the members' keys.
	tracker := dependencies.NewTracker()
	operators, err := auth.NewOperators(cfg.Auth.Issuers, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	flow, err := patient.New(cfg, patient.Options{Recorder: g.rec, Tracker: tracker})
	if err != nil {
		t.Fatal(err)
	}
	g.fed, err = federation.New(cfg, federation.Options{Patient: flow, Tracker: tracker, Operators: operators})
	if err != nil {
		t.Fatal(err)
	}
	g.dir, err = mcsd.New(mcsd.Options{Config: cfg, Registry: g.fed, Recorder: g.rec, Tracker: tracker, Limits: o.limits})
	if err != nil {
		t.Fatal(err)
	}
	gin.SetMode(gin.TestMode)
	e := gin.New()
	e.ContextWithFallback = true
	b := e.Group(base)
	g.fed.RegisterOperator(b.Group("/operator"))
	g.fed.RegisterDataPlane(b.Group("", func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), cfg.Lifecycle().RequestTimeout)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}))
	g.gw = httptest.NewServer(e)
	t.Cleanup(g.gw.Close)
	if o.start {
		if err := g.dir.Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		g.dir.Stop(ctx) //nolint:errcheck // the test is over.
		g.fed.Stop(ctx) //nolint:errcheck // the test is over.
	})
	return g
}

func sign(t testing.TB, key *ecdsa.PrivateKey) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(signer).Claims(map[string]any{
		"iss": issuer, "aud": audience, "sub": "test", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "scope": scope,
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// member starts a member and puts it in the directory: an Organization with the
// member identifier id, and its FHIR REST Endpoint.
func (g *gateway) member(id string) *members.Server {
	g.t.Helper()
	m := members.Start(g.t, members.Options{ID: id, Marker: "MEMBER-BODY-" + id})
	g.members[id] = m
	g.double.MustPut(g.t, g.endpoint(id, m.URL), g.organization(id, id))
	return m
}

// endpoint is member id's FHIR REST Endpoint at address, with its home community id
// typed HCID (member a's a bare OID, as some directories write it; the others'
// urn:oid:).
func (g *gateway) endpoint(id, address string) map[string]any {
	hcid := "urn:oid:" + communityOf(id)
	if id == "a" {
		hcid = communityOf(id)
	}
	return mcsdsupplier.WithHCID(mcsdsupplier.Endpoint("ep-"+id, address), hcid)
}

// organization is member id's Organization, with its member identifier value and
// its patient identifier domain (an identifier of domainSystem), referencing its
// Endpoint ep-<id>.
func (g *gateway) organization(id, value string) map[string]any {
	return mcsdsupplier.WithIdentifier(mcsdsupplier.Organization("org-"+id, system, value, "ep-"+id), domainSystem, domainOf(id))
}

// refresh runs one refresh now.
func (g *gateway) refresh() mcsd.Outcome {
	g.t.Helper()
	return g.dir.Refresh(context.Background())
}

// report is GET {base}/operator/dependencies, raw and decoded.
func (g *gateway) report() (map[string]any, string) {
	g.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.gw.URL+base+"/operator/dependencies", nil)
	req.Header.Set("Authorization", "Bearer "+g.token)
	res, err := g.gw.Client().Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		g.t.Fatalf("the dependency report answered %d: %s", res.StatusCode, raw)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		g.t.Fatal(err)
	}
	return m, string(raw)
}

// wantDirectory checks the report's directory and directory_fault ("" for absent),
// and that the report names no URL and no body of the directory.
func (g *gateway) wantDirectory(state, fault string) {
	g.t.Helper()
	m, raw := g.report()
	if m["directory"] != state {
		g.t.Errorf("directory is %v, want %s (%s)", m["directory"], state, raw)
	}
	got, has := m["directory_fault"]
	if fault == "" && has || fault != "" && got != fault {
		g.t.Errorf("directory_fault is %v, want %q (%s)", got, fault, raw)
	}
	for _, leak := range []string{"MCSD-BODY", "http://", "127.0.0.1", "org-"} {
		if strings.Contains(raw, leak) {
			g.t.Errorf("the report carries %q: %s", leak, raw)
		}
	}
}

// asked is the ids of the members a federated search asked (outcome ok), sorted.
func (g *gateway) asked() []string {
	g.t.Helper()
	res, err := g.gw.Client().Get(g.gw.URL + base + "/fhir/Observation")
	if err != nil {
		g.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var b struct {
		Meta struct {
			Federation []federation.Record `json:"federation"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		g.t.Fatalf("search answered %d: %s", res.StatusCode, raw)
	}
	var ids []string
	for _, r := range b.Meta.Federation {
		if r.Outcome == outbound.OK {
			ids = append(ids, r.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// registryReady is the federation's readiness check "registry".
func (g *gateway) registryReady() error {
	for _, c := range g.fed.Checks() {
		if c.Name() == "registry" {
			return c.Check(context.Background())
		}
	}
	g.t.Fatal("no registry check")
	return nil
}
