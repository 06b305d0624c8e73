package federation

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/outbound"
	"github.com/ferrofed/ferrofed/gateway/proxy"
	"github.com/ferrofed/ferrofed/gateway/searchquery"
)

// member is one [[registry.members]] entry, its query endpoint parsed once.
type member struct {
	id         string
	endpointID string
	base       *url.URL
	// timeout is the member's own budget (timeout_ms), 0 for the request's.
	timeout time.Duration
	// domain is the identifier system of its own Patient ids (identifier_system).
	domain string
}

// within returns ctx bounded by the member's own timeout, if it has one.
func (m *member) within(ctx context.Context) (context.Context, context.CancelFunc) {
	if m.timeout > 0 {
		return context.WithTimeout(ctx, m.timeout)
	}
	return ctx, func() {}
}

// url is the member's URL for a path under its FHIR API (path starts with "/"), with
// the given raw query.
func (m *member) url(path, rawQuery string) string {
	u := *m.base
	u.Path = strings.TrimSuffix(m.base.Path, "/") + path
	u.RawPath = ""
	u.RawQuery = rawQuery
	return u.String()
}

// registry is the members of one loaded configuration, in document order.
type registry struct {
	members []*member
	byID    map[string]*member
	// maxBody caps what the gateway reads of one member's answer to a search or probe.
	maxBody int64
}

// loadRegistry builds the registry of a validated configuration. config.Parse has
// checked the same rules; they are checked again because a Surface may be built from
// a Config assembled in code (tests, the operator), and a member without a usable URL
// must fail here, not on the first query.
func loadRegistry(r config.Registry) (*registry, error) {
	reg := &registry{byID: make(map[string]*member, len(r.Members)), maxBody: r.MaxMemberBodyBytes}
	if reg.maxBody <= 0 {
		reg.maxBody = config.DefaultMaxMemberBodyBytes
	}
	for i, m := range r.Members {
		key := fmt.Sprintf("registry.members[%d]", i)
		if m.ID == "" {
			return nil, fmt.Errorf("%s.id: is required", key)
		}
		if _, dup := reg.byID[m.ID]; dup {
			return nil, fmt.Errorf("%s.id: %q is not unique", key, m.ID)
		}
		u, err := url.Parse(m.QueryEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%s.query_endpoint: must be an absolute http or https URL", key)
		}
		endpointID := m.EndpointID
		if endpointID == "" {
			endpointID = m.ID + "-query"
		}
		if m.TimeoutMS < 0 {
			return nil, fmt.Errorf("%s.timeout_ms: must be greater than zero", key)
		}
		mem := &member{id: m.ID, endpointID: endpointID, base: u, timeout: m.Timeout(), domain: m.IdentifierSystem}
		reg.members = append(reg.members, mem)
		reg.byID[m.ID] = mem
	}
	return reg, nil
}

func (r *registry) endpointIDs() []string {
	ids := make([]string, len(r.members))
	for i, m := range r.members {
		ids[i] = m.endpointID
	}
	return ids
}

// MaxMemberHeaderBytes bounds the head (status line and headers) of a member's
// answer; a longer one fails the call, as the member's.
const MaxMemberHeaderBytes = 64 << 10

// cursorOf reduces a member's next link to a cursor under m's base: same scheme and
// host, a path under the base's. It reports false for a link anywhere else.
func cursorOf(m *member, link string) (string, bool) {
	u, err := url.Parse(link)
	if err != nil || u.Fragment != "" || u.User != nil {
		return "", false
	}
	if !strings.EqualFold(u.Scheme, m.base.Scheme) || !strings.EqualFold(u.Host, m.base.Host) {
		return "", false
	}
	base := strings.TrimSuffix(m.base.EscapedPath(), "/")
	rest, ok := strings.CutPrefix(u.EscapedPath(), base)
	if !ok || !strings.HasPrefix(rest, "/") {
		return "", false
	}
	c := rest
	if u.RawQuery != "" {
		c += "?" + u.RawQuery
	}
	if !searchquery.ValidCursor(c) {
		return "", false
	}
	return c, true
}

// cursorURL is the member URL of a cursor: its base joined with the cursor as it is
// (already escaped).
func (m *member) cursorURL(c string) string {
	u := *m.base
	u.RawQuery = ""
	u.Fragment = ""
	return strings.TrimSuffix(u.String(), "/") + c
}

// decodeToken decodes a continuation token whose members must be reg's.
func decodeToken(k searchquery.Key, tok string, reg *registry, maxCount int) (searchquery.Token, error) {
	return k.Decode(tok, len(reg.members), func(id string) bool {
		_, ok := reg.byID[id]
		return ok
	}, maxCount)
}

// tokenKey authenticates the page tokens of the surface's next links.
type tokenKey = searchquery.Key

// The parts New puts together, each from the package that makes it.
func newTransport() *http.Transport               { return outbound.NewTransport(MaxMemberHeaderBytes) }
func newClient(rt http.RoundTripper) *http.Client { return outbound.NewClient(rt) }
func newRandomKey() (tokenKey, error)             { return searchquery.NewKey() }
func newViaID() string                            { return proxy.NewViaID() }
