package patient_test

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
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/ferrofed/ferrofed/gateway/auth"
	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit"
	"github.com/ferrofed/ferrofed/gateway/bindings/patient"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/test/crashfs"
	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
)

const (
	issuer   = "https://issuer.test"
	audience = "ferrofed"
	scope    = "ferrofed.operator"
	base     = "/api"
)

// The identifier domains of the tests: the master patient index's, and one per member.
const (
	mpi     = "urn:oid:1.3.6.1.4.1.21367.13.20.9000"
	domainA = "urn:oid:1.3.6.1.4.1.21367.13.20.1000"
	domainB = "urn:oid:1.3.6.1.4.1.21367.13.20.2000"
	domainC = "urn:oid:1.3.6.1.4.1.21367.13.20.3000"
)

// gateway is the federation surface with the patient-scoped flow, built from a TOML
// configuration the way assemble builds it (the same constructors, the same trail),
// mounted the way the server mounts it, in front of real loopback members a, b and c.
type gateway struct {
	t       testing.TB
	gw      *httptest.Server
	members map[string]*members.Server
	token   string
	// refuse makes the audit spool refuse every append (ENOSPC), with [audit];
	// refuseOnce refuses the next one only.
	refuse     func(on bool)
	refuseOnce func()
	// arr is the audit record repository, with [audit].
	arr *auditrepo.Server
	// logs are the flow's log lines.
	logMu sync.Mutex
	logs  []string
}

// logged is what the flow has logged so far, one line each.
func (g *gateway) logged() string {
	g.logMu.Lock()
	defer g.logMu.Unlock()
	return strings.Join(g.logs, "\n")
}

type gatewayOptions struct {
	// tables are the binding tables, as TOML.
	tables string
	// audited adds an [audit] table with a spool (on an in-memory file system that
	// refuse can make refuse appends).
	audited bool
	// requestTimeout is server.request_timeout_ms; default 5 s.
	requestTimeout time.Duration
}

var memberDomains = map[string]string{"a": domainA, "b": domainB, "c": domainC}

// memberCommunities are the members' XCPD homeCommunityIds, as HL7v3 writes them.
var memberCommunities = map[string]string{"a": "1.3.6.1.4.1.21367.13.70.1", "b": "1.3.6.1.4.1.21367.13.70.2", "c": "1.3.6.1.4.1.21367.13.70.3"}

func newGateway(t testing.TB, o gatewayOptions) *gateway {
	t.Helper()
	if o.requestTimeout == 0 {
		o.requestTimeout = 5 * time.Second
	}
	g := &gateway{t: t, members: map[string]*members.Server{}, refuse: func(bool) {}, refuseOnce: func() {}}
	var doc strings.Builder
	fmt.Fprintf(&doc, "[server]\nlisten = \"127.0.0.1:0\"\ntermination_message_path = \"\"\nbase_path = %q\nrequest_timeout_ms = %d\n", base, o.requestTimeout.Milliseconds())
	for _, id := range []string{"a", "b", "c"} {
		m := members.Start(t, members.Options{ID: id, Marker: "MEMBER-BODY-" + id})
		g.members[id] = m
		fmt.Fprintf(&doc, "[[registry.members]]\nid = %q\nquery_endpoint = %q\n", id, m.URL)
		if strings.Contains(o.tables, "[resolver]") || strings.Contains(o.tables, `protocol = "pixm"`) {
			fmt.Fprintf(&doc, "identifier_system = %q\n", memberDomains[id])
		}
		if strings.Contains(o.tables, `protocol = "xcpd"`) {
			fmt.Fprintf(&doc, "home_community_id = %q\n", "urn:oid:"+memberCommunities[id])
		}
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
	fmt.Fprintf(&doc, "[[auth.issuers]]\nissuer = %q\naudience = %q\njwks_file = %q\noperator_scope = %q\n", issuer, audience, jwks, scope)
	g.token = sign(t, key)
	var fsys *crashfs.FS
	if o.audited {
		arr := auditrepo.Start(t, auditrepo.Options{})
		g.arr = arr
		fmt.Fprintf(&doc, "[audit]\ndestination = \"repository\"\nurl = %q\nspool_dir = \"/spool\"\n", arr.URL)
		fsys = crashfs.New()
		var refusing, once atomic.Bool
		fsys.Hook = func(op crashfs.Op, _ string) error {
			if op == crashfs.OpWrite && (refusing.Load() || once.CompareAndSwap(true, false)) {
				return syscall.ENOSPC
			}
			return nil
		}
		g.refuse = refusing.Store
		g.refuseOnce = func() { once.Store(true) }
	}
	doc.WriteString(o.tables)
	cfg, err := config.Parse([]byte(doc.String()), "test.toml", config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The same shared parts as assemble, made first.
	metrics := bindings.NewMetrics()
	tracker := dependencies.NewTracker()
	operators, err := auth.NewOperators(cfg.Auth.Issuers, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ao := audit.Options{Metrics: metrics, Logger: logr.Discard(), Tracker: tracker, Authorize: operators.Middleware()}
	if fsys != nil {
		ao.FS = fsys
	}
	trail, err := audit.New(cfg, ao)
	if err != nil {
		t.Fatal(err)
	}
	flowLog := funcr.New(func(prefix, args string) {
		g.logMu.Lock()
		defer g.logMu.Unlock()
		g.logs = append(g.logs, prefix+" "+args)
	}, funcr.Options{})
	var rec bindings.Recorder = bindings.NoRecorder{}
	fo := federation.Options{Tracker: tracker, Operators: operators}
	if trail != nil {
		rec, fo.Audit = trail, trail
	}
	flow, err := patient.New(cfg, patient.Options{Recorder: rec, Metrics: metrics, Tracker: tracker, Logger: flowLog})
	if err != nil {
		t.Fatal(err)
	}
	fo.Patient = flow
	fed, err := federation.New(cfg, fo)
	if err != nil {
		t.Fatal(err)
	}
	if trail != nil {
		if err := trail.Start(); err != nil {
			t.Fatal(err)
		}
	}
	gin.SetMode(gin.TestMode)
	e := gin.New()
	e.ContextWithFallback = true
	b := e.Group(base)
	fed.RegisterOperator(b.Group("/operator"))
	fed.RegisterDataPlane(b.Group("", func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), cfg.Lifecycle().RequestTimeout)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}))
	g.gw = httptest.NewServer(e)
	t.Cleanup(g.gw.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if trail != nil {
			for _, s := range trail.Stoppers() {
				s.Stop(ctx) //nolint:errcheck // the test is over.
			}
		}
		fed.Stop(ctx) //nolint:errcheck // the test is over.
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

// answer is what a test reads of a search's answer.
type answer struct {
	status int
	raw    []byte
	Bundle struct {
		ResourceType string `json:"resourceType"`
		Total        *int   `json:"total"`
		Meta         struct {
			Federation []federation.Record `json:"federation"`
			Extension  []struct {
				Extension []struct {
					URL         string `json:"url"`
					ValueString string `json:"valueString"`
					ValueCode   string `json:"valueCode"`
				} `json:"extension"`
			} `json:"extension"`
		} `json:"meta"`
		Issue []fhir.Issue `json:"issue"`
		Entry []struct {
			Resource struct {
				ResourceType string       `json:"resourceType"`
				Issue        []fhir.Issue `json:"issue"`
			} `json:"resource"`
		} `json:"entry"`
	}
}

// search asks the gateway GET {base}/fhir/{path}, anonymously.
func (g *gateway) search(path string) answer {
	g.t.Helper()
	return g.searchAs(path, "")
}

// searchAs asks as the holder of token ("" for anonymous).
func (g *gateway) searchAs(path, token string) answer {
	g.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.gw.URL+base+"/fhir/"+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := g.gw.Client().Do(req)
	if err != nil {
		g.t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		g.t.Fatal(err)
	}
	a := answer{status: res.StatusCode, raw: raw}
	if err := json.Unmarshal(raw, &a.Bundle); err != nil {
		g.t.Fatalf("GET %s answered %d, not JSON: %s", path, res.StatusCode, raw)
	}
	// Every answer is R4 (but for meta.federation): the excluded records' extension,
	// the flow's outcome entries and its refusals included. A benchmark does not
	// validate: the figure is the gateway's cost.
	if _, bench := g.t.(*testing.B); bench {
		return a
	}
	if err := fhirschema.ValidateFederated(raw); err != nil {
		g.t.Fatalf("GET %s answered %d, not valid R4: %v\n%.1000s", path, res.StatusCode, err, raw)
	}
	return a
}

// record is the meta.federation record of member id, and whether there is one.
func (a answer) record(id string) (federation.Record, bool) {
	for _, r := range a.Bundle.Meta.Federation {
		if r.ID == id {
			return r, true
		}
	}
	return federation.Record{}, false
}

// excludedBy is the excluded_by of member id's record in the extension.
func (a answer) extensionExcludedBy(id string) string {
	for _, e := range a.Bundle.Meta.Extension {
		var member, by string
		for _, sub := range e.Extension {
			switch sub.URL {
			case "member":
				member = sub.ValueString
			case "excluded_by":
				by = sub.ValueCode
			}
		}
		if member == id {
			return by
		}
	}
	return ""
}

// report is the dependency report: every key, endpoints flattened as "endpoints.<id>".
func (g *gateway) report() (map[string]string, []byte) {
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
		g.t.Fatalf("dependency report answered %d: %s", res.StatusCode, raw)
	}
	var r map[string]json.RawMessage
	if err := json.Unmarshal(raw, &r); err != nil {
		g.t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range r {
		if k == "endpoints" {
			var eps map[string]string
			json.Unmarshal(v, &eps) //nolint:errcheck // checked by the shape assertions.
			for id, s := range eps {
				out["endpoints."+id] = s
			}
			continue
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			out[k] = s
		}
	}
	return out, raw
}

// asked is how many requests each member received.
func (g *gateway) asked() map[string]int64 {
	out := map[string]int64{}
	for id, m := range g.members {
		out[id] = int64(m.Requests())
	}
	return out
}

// lastQuery is the query member id was last asked, decoded.
func (g *gateway) lastQuery(id string) url.Values {
	q, _ := url.ParseQuery(g.members[id].LastRequest().RawQuery)
	return q
}
