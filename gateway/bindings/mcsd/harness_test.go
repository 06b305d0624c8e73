package mcsd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/bindings/mcsd"
	"github.com/ferrofed/ferrofed/gateway/bindings/patient"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/test/doubles/mcsdsupplier"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/gatewaytest"
)

const (
	base = "/api"
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
// mounted as the server mounts it, in front of real loopback members. It is mounted
// without the server (gatewaytest.Mount), and its parts are put together here as
// assemble does, because the tests search and read the report while the registry is
// not ready yet (the server's gate would refuse them), run refreshes and reloads by
// hand, give the directory limits of their own, and make the recorder refuse records:
// assemble and the server give none of that.
type gateway struct {
	*gatewaytest.Gateway
	t       testing.TB
	fed     *federation.Surface
	dir     *mcsd.Directory
	double  *mcsdsupplier.Server
	members map[string]*members.Server
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
	cfg, is := gatewaytest.Config(t, fmt.Sprintf("[registry.mcsd]\nurl = %q\nmember_identifier_system = %q\n%s\n%s",
		g.double.URL, system, o.mcsd, o.tables), gatewaytest.WithServer(fmt.Sprintf("base_path = %q\nrequest_timeout_ms = 5000\n", base)))
	g.cfg = cfg
	// The patient-scoped flow, when the tables configure one (nil otherwise): a
	// directory's registry gives it the members' keys.
	flow, err := patient.New(cfg, patient.Options{Recorder: g.rec})
	if err != nil {
		t.Fatal(err)
	}
	if g.fed, err = federation.New(cfg, federation.Options{Patient: flow}); err != nil {
		t.Fatal(err)
	}
	flow.Attach(g.fed.Tracker())
	g.dir, err = mcsd.New(mcsd.Options{Config: cfg, Registry: g.fed, Recorder: g.rec, Limits: o.limits})
	if err != nil {
		t.Fatal(err)
	}
	g.dir.Attach(g.fed.Tracker())
	g.Gateway = gatewaytest.Mount(t, cfg, is, g.fed, g.dir.Surface(nil))
	if o.start {
		if err := g.dir.Start(); err != nil {
			t.Fatal(err)
		}
	}
	return g
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

// wantDirectory checks the report's directory and directory_fault ("" for absent),
// and that the report names no URL and no body of the directory.
func (g *gateway) wantDirectory(state, fault string) {
	g.t.Helper()
	m, raw := g.Report()
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
	res, raw := g.Request(http.MethodGet, "/fhir/Observation", "", nil)
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
		if r.Outcome == federation.OK {
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
