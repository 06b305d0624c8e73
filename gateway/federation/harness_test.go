package federation_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/ferrofed/ferrofed/gateway/assemble"
	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
	"github.com/ferrofed/ferrofed/test/gatewaytest"
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

// harness is a gateway built by the composition root (gatewaytest.Mounted: its parts
// mounted as the server mounts them, without the server's gate and bounds; Serve adds
// the server over the same parts), in front of real loopback members.
type harness struct {
	*gatewaytest.Gateway
	t       testing.TB
	members map[string]*members.Server
	urls    []string
	strict  bool
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
	// tables are more tables ([limits], [forwarding], [consent]), as TOML.
	tables string
	// issuerKeys are more keys of the issuer's [[auth.issuers]] table (its endpoints).
	issuerKeys string
	// log is the gateway's logger; default none.
	log logr.Logger
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
	opts := []gatewaytest.Option{gatewaytest.WithServer(fmt.Sprintf("base_path = %q\nrequest_timeout_ms = %d\n", testBase, o.requestTimeout.Milliseconds()))}
	if o.noIssuer {
		opts = append(opts, gatewaytest.WithoutIssuers())
	}
	if o.issuerKeys != "" {
		opts = append(opts, gatewaytest.WithIssuerKeys(o.issuerKeys))
	}
	if o.log.GetSink() != nil {
		opts = append(opts, gatewaytest.WithLog(o.log))
	}
	if o.transport != nil {
		opts = append(opts, gatewaytest.WithAssemble(assemble.WithFederationOptions(func(fo *federation.Options) { fo.Transport = o.transport })))
	}
	h.Gateway = gatewaytest.Mounted(t, toml.String(), opts...)
	return h
}
