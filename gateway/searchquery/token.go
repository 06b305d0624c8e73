package searchquery

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/proxy"
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
//
// A token is bound to the caller it was made for and expires: it carries a keyed hash
// of the caller (Key.Caller), never the caller itself, since it travels in a URL, and
// the time past which it is refused (federation.page_token_ttl_ms after its page).

const (
	// tokenVersion is the token layout; a token of another layout is refused (1 was
	// bound to no caller and never expired).
	tokenVersion = 2
	// MaxPageTokenBytes is the longest token accepted (and made): it travels in a URL.
	MaxPageTokenBytes = 8192
	// maxCursorBytes bounds one member's cursor; a member whose next link is longer
	// stops being paged.
	MaxCursorBytes = 2048
	// maxOffset bounds a position's offset: the entries of one member page already
	// served (a member may answer more than the _count it was asked for).
	maxOffset = 1 << 20
	// tokenContext binds the MAC to this use of the key.
	tokenContext = "ferrofed-page-token-v1\x00"
	// callerContext binds a caller's hash to its use of the key.
	callerContext = "ferrofed-page-caller-v1\x00"
)

// Token is a continuation token's content.
type Token struct {
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
	Members []TokenMember `json:"m"`
	// Caller is whom the token was made for, as Key.Caller hashes it.
	Caller string `json:"who"`
	// Expires is when the token stops being accepted, in Unix milliseconds.
	Expires int64 `json:"exp"`
	// Consent is the consent question the first page relied on, when it asked one: a
	// next page past its Until asks again.
	Consent *TokenConsent `json:"cs,omitempty"`
}

// TokenConsent is a consent question: the type, the patient's identifier, and until
// when (Unix milliseconds) its answer may be relied on.
type TokenConsent struct {
	Type   string `json:"t"`
	System string `json:"s"`
	Value  string `json:"v"`
	Until  int64  `json:"u"`
}

type TokenMember struct {
	ID     string `json:"id"`
	Cursor string `json:"c"`
	Offset int    `json:"o,omitempty"`
	// Remaining is how many matches the member has not given yet, from its total;
	// absent when it gave none. It only decides which members a page asks at once.
	Remaining *int `json:"r,omitempty"`
	// Order is what the gateway learned of the member's order in a sorted search, and
	// the blocks it holds back (missing.go).
	Order *Order `json:"ord,omitempty"`
}

// Key signs and checks tokens.
type Key []byte

// NewKey makes a key for a process that was given none.
func NewKey() (Key, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return k, nil
}

// MAC is the HMAC-SHA256 of payload under k, bound to this use of the key.
func (k Key) MAC(payload string) []byte {
	h := hmac.New(sha256.New, k)
	h.Write([]byte(tokenContext))
	h.Write([]byte(payload))
	return h.Sum(nil)
}

// Caller is the value a token carries for the caller issuer and subject (a verified
// token's; "" and "anonymous" for a caller without one): an HMAC under the key, so that
// the token names nobody, and every replica that shares the key computes the same.
func (k Key) Caller(issuer, subject string) string {
	h := hmac.New(sha256.New, k)
	fmt.Fprintf(h, "%s%d\x00%s\x00%s", callerContext, len(issuer), issuer, subject)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
}

var errTokenTooLong = errors.New("the continuation token would be longer than the gateway accepts")

// Encode signs t: base64url(JSON) "." base64url(HMAC-SHA256).
func (k Key) Encode(t Token) (string, error) {
	t.V = tokenVersion
	body, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	payload := base64.RawURLEncoding.EncodeToString(body)
	tok := payload + "." + base64.RawURLEncoding.EncodeToString(k.MAC(payload))
	if len(tok) > MaxPageTokenBytes {
		return "", errTokenTooLong
	}
	return tok, nil
}

// EncodeFitting signs t with as many of its members, in registry order, as a token of
// at most MaxPageTokenBytes can carry, and returns the members left out (none when
// all fit). It fails only when not even one member fits, or on an encoding error.
func (k Key) EncodeFitting(t Token) (string, []TokenMember, error) {
	tok, err := k.Encode(t)
	if !errors.Is(err, errTokenTooLong) {
		return tok, nil, err
	}
	all := t.Members
	// The longest prefix that fits: fits(n) is monotone in n, so bisect it.
	lo, hi := 0, len(all)-1 // all[:lo] is known to fit (or lo is 0), all[:hi+1] not to
	for lo < hi {
		mid := (lo + hi + 1) / 2
		t.Members = all[:mid]
		if _, err := k.Encode(t); err == nil {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo == 0 {
		return "", nil, errTokenTooLong
	}
	t.Members = all[:lo]
	tok, err = k.Encode(t)
	return tok, all[lo:], err
}

// BadToken is every refused token's error: which check failed is the gateway's
// business, not a forger's. Status and Code are the answer's (400 and invalid when
// zero).
type BadToken struct {
	Reason string
	Status int
	Code   string
}

func (e BadToken) Error() string { return "the _page continuation token is not valid: " + e.Reason }

// Refusal is the status and the issue code of the answer that refuses the token.
func (e BadToken) Refusal() (status int, code string) {
	if e.Status == 0 {
		return http.StatusBadRequest, "invalid"
	}
	return e.Status, e.Code
}

// Refuse answers a token refused with err (a BadToken, else a 400): an
// OperationOutcome naming _page, and on a 401 the challenge of the gateway's realm
// (gateway/auth's), since HTTP asks every 401 for one.
func Refuse(w http.ResponseWriter, err error) {
	var bad BadToken
	errors.As(err, &bad)
	status, code := bad.Refusal()
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ferrofed"`)
	}
	fhir.Write(w, status, fhir.ParamOutcome(code, "_page", err.Error()))
}

// For checks that a decoded token was made for caller (Key.Caller) and has not expired
// at now: another caller's is a 401 (the link is only its maker's), an expired one a
// 400 whose issue code is expired.
func (t Token) For(caller string, now time.Time) error {
	if !hmac.Equal([]byte(t.Caller), []byte(caller)) {
		return BadToken{Reason: "it was made for another caller: follow the next links of your own searches", Status: http.StatusUnauthorized, Code: "security"}
	}
	if now.UnixMilli() >= t.Expires {
		return BadToken{Reason: "it has expired: search again from the first page", Status: http.StatusBadRequest, Code: "expired"}
	}
	return nil
}

// Decode checks a token's size, MAC and content and returns it. Its members are
// checked against the registry's (members of them; known tells whether an id is
// one): each is configured, named once, with a cursor that stays under its base.
func (k Key) Decode(tok string, members int, known func(id string) bool, maxCount int) (Token, error) {
	var t Token
	if len(tok) > MaxPageTokenBytes {
		return t, BadToken{Reason: "it is longer than " + fmt.Sprint(MaxPageTokenBytes) + " bytes"}
	}
	payload, sig, ok := strings.Cut(tok, ".")
	if !ok {
		return t, BadToken{Reason: "it is malformed"}
	}
	mac, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(mac, k.MAC(payload)) {
		return t, BadToken{Reason: "it was not made by this gateway (or was altered)"}
	}
	body, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return t, BadToken{Reason: "it is malformed"}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return t, BadToken{Reason: "it is malformed"}
	}
	switch {
	case t.V != tokenVersion:
		return t, BadToken{Reason: "it is of another version"}
	case t.Caller == "" || t.Expires <= 0:
		return t, BadToken{Reason: "it is bound to no caller or has no expiry"}
	case !fhir.ValidResourceType(t.Type):
		return t, BadToken{Reason: "it names no resource type"}
	case t.Count < 1 || t.Count > maxCount:
		return t, BadToken{Reason: "its page size is out of range"}
	case t.Total != nil && *t.Total < 0:
		return t, BadToken{Reason: "its total is negative"}
	case len(t.Members) == 0 || len(t.Members) > members:
		return t, BadToken{Reason: "it names no or too many members"}
	}
	keys, err := ParseSort(t.Type, t.Sort)
	if err != nil {
		return t, BadToken{Reason: "its sort is not supported"}
	}
	seen := make(map[string]bool, len(t.Members))
	for _, m := range t.Members {
		if !known(m.ID) || seen[m.ID] {
			return t, BadToken{Reason: "it names a member that is not configured"}
		}
		seen[m.ID] = true
		if m.Remaining != nil && *m.Remaining < 0 {
			return t, BadToken{Reason: "it holds a negative count"}
		}
		if !ValidCursor(m.Cursor) || m.Offset < 0 || m.Offset > maxOffset || (m.Order != nil && !m.Order.valid(len(keys))) {
			return t, BadToken{Reason: "it holds a position that is not under a member's base"}
		}
	}
	return t, nil
}

// ValidCursor reports whether c is a path and query that, joined to a member's base,
// stays under it: an absolute path without dot segments (raw, percent-encoded or
// behind a ";" parameter), no authority, no fragment, no backslash, nothing outside
// printable ASCII.
func ValidCursor(c string) bool {
	if len(c) < 2 || len(c) > MaxCursorBytes || c[0] != '/' || c[1] == '/' {
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
	// The rule of every path sent to a member (proxy.CleanPath): no dot segment, bare,
	// behind a ";" parameter or percent-encoded, once or more.
	for seg := range strings.SplitSeq(path[1:], "/") {
		if proxy.CheckSegment(seg) != nil {
			return false
		}
	}
	return !strings.Contains(dec, "\\") && !strings.HasPrefix(dec, "//")
}

// UnlinkedOutcome is the warning of a page whose next link could not carry every
// member's position: the members left out have more matches that following next will
// not return, and the client is told which.
func UnlinkedOutcome(left []TokenMember) fhir.OperationOutcome {
	const named = 20
	ids := make([]string, 0, min(len(left), named))
	for _, m := range left[:min(len(left), named)] {
		ids = append(ids, m.ID)
	}
	list := strings.Join(ids, ", ")
	if len(left) > named {
		list += fmt.Sprintf(" and %d more", len(left)-named)
	}
	return fhir.OperationOutcome{ResourceType: "OperationOutcome", Issue: []fhir.Issue{{
		Severity: "warning", Code: "too-costly",
		Diagnostics: fmt.Sprintf("the next link cannot carry the position of every member that has more (a continuation token is at most %d bytes): "+
			"following it will not return the further matches of %d members (%s); narrow the search to page through them", MaxPageTokenBytes, len(left), list),
	}}}
}
