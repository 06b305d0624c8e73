package federation

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// The continuation token of a federated search's next link (docs/data-plane.md): each
// member's position, authenticated with the gateway's page token key, so that a
// replica that shares the key can serve the next page and nobody else can write one.
//
// A position is the member's own next link reduced to a path and query under that
// member's base (cursor), plus how many entries of that page were served already
// (offset). The base is never in the token: the gateway joins a cursor to the base of
// the member the registry names, so that even a token signed with the right key
// cannot send a request anywhere but under a configured member's base.

const (
	// tokenVersion is the token layout; a token of another layout is refused.
	tokenVersion = 1
	// MaxPageTokenBytes is the longest token accepted (and made): it travels in a URL.
	MaxPageTokenBytes = 8192
	// maxCursorBytes bounds one member's cursor; a member whose next link is longer
	// stops being paged.
	maxCursorBytes = 2048
	// maxOffset bounds a position's offset: the entries of one member page already
	// served (a member may answer more than the _count it was asked for).
	maxOffset = 1 << 20
	// tokenContext binds the MAC to this use of the key.
	tokenContext = "ferrofed-page-token-v1\x00"
)

// pageToken is a continuation token's content.
type pageToken struct {
	V int `json:"v"`
	// Type is the searched resource type.
	Type string `json:"t"`
	// Count is the page size (_count, resolved).
	Count int `json:"n"`
	// Sort is the _sort of the search, as the client gave it ("" for none).
	Sort string `json:"s,omitempty"`
	// Total is Bundle.total as the first page found it, absent when unknown.
	Total *int `json:"tot,omitempty"`
	// Members are the positions of the members that have more to give, in registry
	// order.
	Members []tokenMember `json:"m"`
}

type tokenMember struct {
	ID     string `json:"id"`
	Cursor string `json:"c"`
	Offset int    `json:"o,omitempty"`
	// Remaining is how many matches the member has not given yet, from its total;
	// absent when it gave none. It only decides which members a page asks at once.
	Remaining *int `json:"r,omitempty"`
}

// tokenKey signs and checks tokens.
type tokenKey []byte

// newRandomKey makes a key for a process that was given none.
func newRandomKey() (tokenKey, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return k, nil
}

func (k tokenKey) mac(payload string) []byte {
	h := hmac.New(sha256.New, k)
	h.Write([]byte(tokenContext))
	h.Write([]byte(payload))
	return h.Sum(nil)
}

var errTokenTooLong = errors.New("the continuation token would be longer than the gateway accepts")

// encode signs t: base64url(JSON) "." base64url(HMAC-SHA256).
func (k tokenKey) encode(t pageToken) (string, error) {
	t.V = tokenVersion
	body, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	payload := base64.RawURLEncoding.EncodeToString(body)
	tok := payload + "." + base64.RawURLEncoding.EncodeToString(k.mac(payload))
	if len(tok) > MaxPageTokenBytes {
		return "", errTokenTooLong
	}
	return tok, nil
}

// encodeFitting signs t with as many of its members, in registry order, as a token of
// at most MaxPageTokenBytes can carry, and returns the members left out (none when
// all fit). It fails only when not even one member fits, or on an encoding error.
func (k tokenKey) encodeFitting(t pageToken) (string, []tokenMember, error) {
	tok, err := k.encode(t)
	if !errors.Is(err, errTokenTooLong) {
		return tok, nil, err
	}
	all := t.Members
	// The longest prefix that fits: fits(n) is monotone in n, so bisect it.
	lo, hi := 0, len(all)-1 // all[:lo] is known to fit (or lo is 0), all[:hi+1] not to
	for lo < hi {
		mid := (lo + hi + 1) / 2
		t.Members = all[:mid]
		if _, err := k.encode(t); err == nil {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo == 0 {
		return "", nil, errTokenTooLong
	}
	t.Members = all[:lo]
	tok, err = k.encode(t)
	return tok, all[lo:], err
}

// errBadToken is every refused token's error: which check failed is the gateway's
// business, not a forger's.
type errBadToken struct{ reason string }

func (e errBadToken) Error() string { return "the _page continuation token is not valid: " + e.reason }

// decode checks a token's size, MAC and content and returns it. Its members are
// checked against reg: each is configured, named once, with a cursor that stays
// under its base.
func (k tokenKey) decode(tok string, reg *registry, maxCount int) (pageToken, error) {
	var t pageToken
	if len(tok) > MaxPageTokenBytes {
		return t, errBadToken{"it is longer than " + fmt.Sprint(MaxPageTokenBytes) + " bytes"}
	}
	payload, sig, ok := strings.Cut(tok, ".")
	if !ok {
		return t, errBadToken{"it is malformed"}
	}
	mac, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(mac, k.mac(payload)) {
		return t, errBadToken{"it was not made by this gateway (or was altered)"}
	}
	body, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return t, errBadToken{"it is malformed"}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return t, errBadToken{"it is malformed"}
	}
	switch {
	case t.V != tokenVersion:
		return t, errBadToken{"it is of another version"}
	case !ValidResourceType(t.Type):
		return t, errBadToken{"it names no resource type"}
	case t.Count < 1 || t.Count > maxCount:
		return t, errBadToken{"its page size is out of range"}
	case t.Total != nil && *t.Total < 0:
		return t, errBadToken{"its total is negative"}
	case len(t.Members) == 0 || len(t.Members) > len(reg.members):
		return t, errBadToken{"it names no or too many members"}
	}
	if _, err := parseSort(t.Type, t.Sort); err != nil {
		return t, errBadToken{"its sort is not supported"}
	}
	seen := make(map[string]bool, len(t.Members))
	for _, m := range t.Members {
		if _, ok := reg.byID[m.ID]; !ok || seen[m.ID] {
			return t, errBadToken{"it names a member that is not configured"}
		}
		seen[m.ID] = true
		if m.Remaining != nil && *m.Remaining < 0 {
			return t, errBadToken{"it holds a negative count"}
		}
		if !validCursor(m.Cursor) || m.Offset < 0 || m.Offset > maxOffset {
			return t, errBadToken{"it holds a position that is not under a member's base"}
		}
	}
	return t, nil
}

// validCursor reports whether c is a path and query that, joined to a member's base,
// stays under it: an absolute path without dot segments (raw, percent-encoded or
// behind a ";" parameter), no authority, no fragment, no backslash, nothing outside
// printable ASCII.
func validCursor(c string) bool {
	if len(c) < 2 || len(c) > maxCursorBytes || c[0] != '/' || c[1] == '/' {
		return false
	}
	for i := 0; i < len(c); i++ {
		if c[i] <= ' ' || c[i] >= 0x7f || c[i] == '#' || c[i] == '\\' {
			return false
		}
	}
	path, _, _ := strings.Cut(c, "?")
	dec, err := url.PathUnescape(path)
	if err != nil {
		return false
	}
	// The rule of every path sent to a member (memberPath): no dot segment, bare,
	// behind a ";" parameter or percent-encoded, once or more.
	for seg := range strings.SplitSeq(path[1:], "/") {
		if checkSegment(seg) != nil {
			return false
		}
	}
	return !strings.Contains(dec, "\\") && !strings.HasPrefix(dec, "//")
}

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
	if !validCursor(c) {
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
