package federation

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferrofed/ferrofed/gateway/bindings/patient"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
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
// server mounts it (base path, a data-plane group with the request deadline, an
// operator group), in front of real loopback members.
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
	var flow *patient.Flow
	if o.patient {
		if flow, err = patient.New(cfg, patient.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(cfg, Options{Registerer: h.registry, Transport: o.transport, Patient: flow})
	if err != nil {
		t.Fatal(err)
	}
	flow.Attach(s.Tracker())
	h.surface = s
	h.cfg = cfg
	gin.SetMode(gin.TestMode)
	e := gin.New()
	e.ContextWithFallback = true
	base := e.Group(testBase)
	s.RegisterOperator(base.Group("/operator"))
	s.RegisterDataPlane(base.Group("", func(c *gin.Context) {
		// The server's request deadline (gateway/server requestTimeout).
		ctx, cancel := context.WithTimeout(c.Request.Context(), cfg.Lifecycle().RequestTimeout)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}))
	h.gw = httptest.NewServer(e)
	t.Cleanup(h.gw.Close)
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("stopping the surface: %v", err)
		}
	})
	return h
}

// reply is what a test reads of the gateway's answer besides its body. The helpers
// that send a request read and close the body where they obtain the response, and
// hand back a reply instead of the *http.Response.
type reply struct {
	StatusCode    int
	Header        http.Header
	ContentLength int64
}

func replyOf(res *http.Response) *reply {
	return &reply{StatusCode: res.StatusCode, Header: res.Header, ContentLength: res.ContentLength}
}

// do sends a request to the gateway; authorization is the whole header value, "" for none.
func (h *harness) do(ctx context.Context, method, path, authorization string, header http.Header) (*reply, []byte, error) {
	h.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, h.gw.URL+testBase+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	res, err := h.gw.Client().Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err == nil {
		h.checkR4(method+" "+path, res, body)
	}
	return replyOf(res), body, err
}

// checkR4 validates every FHIR JSON answer of the gateway against HL7's R4 JSON
// schema: with strict_fhir it must be valid R4; without it the one problem allowed is
// meta.federation (docs/data-plane.md, "A federated search").
func (h *harness) checkR4(what string, res *http.Response, body []byte) {
	h.t.Helper()
	if res.Header.Get("Content-Type") != FHIRJSON || len(body) == 0 || body[0] != '{' {
		return
	}
	if !strings.Contains(string(body[:min(len(body), 64)]), `"resourceType"`) {
		return
	}
	validate := fhirschema.ValidateFederated
	if h.strict {
		validate = fhirschema.Validate
	}
	if err := validate(body); err != nil {
		h.t.Errorf("%s answered %d, not valid R4: %v\n%.2000s", what, res.StatusCode, err, body)
	}
}

func (h *harness) get(path string) (*reply, []byte) {
	h.t.Helper()
	res, body, err := h.do(context.Background(), http.MethodGet, path, "", nil)
	if err != nil {
		h.t.Fatalf("GET %s: %v", path, err)
	}
	return res, body
}

// report reads the dependency report with the operator token; it returns the raw body
// too, for the assertions on what it must never contain.
func (h *harness) report() (map[string]string, []byte) {
	h.t.Helper()
	res, body, err := h.do(context.Background(), http.MethodGet, "/operator/dependencies", "Bearer "+h.token, nil)
	if err != nil || res.StatusCode != 200 {
		h.t.Fatalf("dependency report: %v %v %s", res, err, body)
	}
	var r struct {
		Endpoints map[string]string `json:"endpoints"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		h.t.Fatal(err)
	}
	return r.Endpoints, body
}

func (h *harness) wantStates(want map[string]string) []byte {
	h.t.Helper()
	got, raw := h.report()
	if len(got) != len(want) {
		h.t.Fatalf("report %s, want %v", raw, want)
	}
	for id, s := range want {
		if got[id] != s {
			h.t.Fatalf("report %s, want %v", raw, want)
		}
	}
	return raw
}

// searchAnswer is the federated Bundle as a client reads it.
type searchAnswer struct {
	ResourceType string `json:"resourceType"`
	Type         string `json:"type"`
	Meta         struct {
		Federation []Record         `json:"federation"`
		Extension  []map[string]any `json:"extension"`
	} `json:"meta"`
	Total *int   `json:"total"`
	Link  []Link `json:"link"`
	Entry []struct {
		FullURL  string `json:"fullUrl"`
		Resource struct {
			ResourceType string `json:"resourceType"`
			ID           string `json:"id"`
			BirthDate    string `json:"birthDate"`
			Meta         struct {
				LastUpdated string `json:"lastUpdated"`
			} `json:"meta"`
			Name []struct {
				Family string `json:"family"`
			} `json:"name"`
			Issue []Issue `json:"issue"`
		} `json:"resource"`
		Search struct {
			Mode string `json:"mode"`
		} `json:"search"`
	} `json:"entry"`
}

func (b searchAnswer) matches() int {
	n := 0
	for _, e := range b.Entry {
		if e.Search.Mode == "match" {
			n++
		}
	}
	return n
}

func (b searchAnswer) link(relation string) string {
	for _, l := range b.Link {
		if l.Relation == relation {
			return l.URL
		}
	}
	return ""
}

// postForm POSTs body with its content type to the gateway.
func (h *harness) postForm(path, body, contentType string) (*reply, []byte) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.gw.URL+testBase+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	res, err := h.gw.Client().Do(req)
	if err != nil {
		h.t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	h.checkR4("POST "+path, res, b)
	return replyOf(res), b
}
