package federation

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferrofed/ferrofed/gateway/auth"
	"github.com/ferrofed/ferrofed/gateway/bindings/patient"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/server"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
	"github.com/ferrofed/ferrofed/test/gatewaytest/mount"
)

const testBase = "/api"

// node is one member of a harness: its registry id and how it behaves.
type node struct {
	id   string
	opts members.Options
	url  string // instead of a members.Server: any loopback server's FHIR base
	// timeout is the member's timeout_ms, 0 for none.
	timeout time.Duration
}

// harness is a gateway made of the federation surface alone, mounted the way the
// server mounts it (mount.Serve; the package's own tests cannot import the composition
// root, which imports the package), in front of real loopback members.
type harness struct {
	t        testing.TB
	surface  *Surface
	gw       *httptest.Server
	members  map[string]*members.Server
	urls     []string
	token    string
	registry *prometheus.Registry
	cfg      *config.Config
	strict   bool
}

type harnessOptions struct {
	requestTimeout time.Duration
	noIssuer       bool
	memberReady    bool
	maxBody        int64
	// transport carries the member calls instead of the surface's own (benchmarks).
	transport http.RoundTripper
	// strictFHIR sets [federation] strict_fhir: then every answer must be valid R4.
	strictFHIR bool
	// federation is more of the [federation] table, as TOML lines.
	federation string
	// tables are more tables ([limits], [forwarding]), as TOML.
	tables string
	// patient runs the patient-scoped flow of the tables ([consent], …) in front of
	// the fan-out, as assemble does.
	patient bool
}

func newHarness(t testing.TB, o harnessOptions, nodes ...node) *harness {
	t.Helper()
	if o.requestTimeout == 0 {
		o.requestTimeout = 5 * time.Second
	}
	h := &harness{t: t, members: map[string]*members.Server{}, strict: o.strictFHIR}
	if err := fhirschema.Warm(); err != nil {
		t.Fatal(err)
	}
	var toml strings.Builder
	// The listen address is for the benchmarks, which also serve the surface from the
	// gateway's own server (serveFull); the harness's gin engine ignores it.
	fmt.Fprintf(&toml, "[server]\nlisten = \"127.0.0.1:0\"\ntermination_message_path = \"\"\nbase_path = %q\nrequest_timeout_ms = %d\n", testBase, o.requestTimeout.Milliseconds())
	if o.memberReady {
		toml.WriteString("[health]\nmember_ready_check = true\n")
	}
	if o.strictFHIR || o.federation != "" {
		fmt.Fprintf(&toml, "[federation]\nstrict_fhir = %v\n%s\n", o.strictFHIR, o.federation)
	}
	toml.WriteString(o.tables + "\n")
	if o.maxBody > 0 {
		fmt.Fprintf(&toml, "[registry]\nmax_member_body_bytes = %d\n", o.maxBody)
	}
	for _, n := range nodes {
		u := n.url
		if u == "" {
			if n.opts.ID == "" {
				n.opts.ID = n.id
			}
			m := members.Start(t, n.opts)
			h.members[n.id] = m
			u = m.URL
		}
		h.urls = append(h.urls, u)
		fmt.Fprintf(&toml, "[[registry.members]]\nid = %q\nquery_endpoint = %q\n", n.id, u)
		if n.timeout > 0 {
			fmt.Fprintf(&toml, "timeout_ms = %d\n", n.timeout.Milliseconds())
		}
	}
	if !o.noIssuer {
		is := issuer.New(t)
		toml.WriteString(is.Table())
		h.token = is.Operator(t)
	}
	cfg, err := config.Parse([]byte(toml.String()), "test.toml", config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h.registry = prometheus.NewPedanticRegistry()
	tracker := dependencies.NewTracker()
	var flow *patient.Flow
	if o.patient {
		if flow, err = patient.New(cfg, patient.Options{Tracker: tracker}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(cfg, Options{Transport: o.transport, Patient: flow, Tracker: tracker, Operators: operatorsOf(t, cfg)})
	if err != nil {
		t.Fatal(err)
	}
	// The dependency states, registered as the composition root registers them.
	h.registry.MustRegister(tracker.Collector())
	h.surface = s
	h.cfg = cfg
	h.gw = mount.Serve(t, cfg, h.registration())
	return h
}

// registration is the surface as the composition root registers it with the server.
func (h *harness) registration() server.Registration {
	s := h.surface
	return server.Registration{Name: "federation", DataPlane: s.RegisterDataPlane, Operator: s.RegisterOperator,
		Checks: s.Checks(), Stop: s.Stop, Reload: s.PrepareReload, Collectors: []prometheus.Collector{s.tracker.Collector()}}
}

// operatorsOf is the operator-token check of cfg's issuers, as the composition root
// makes it.
func operatorsOf(t testing.TB, cfg *config.Config) *auth.Operators {
	t.Helper()
	o, err := auth.NewOperators(cfg.Auth.Issuers, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return o
}
