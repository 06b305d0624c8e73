package access_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
	"github.com/ferrofed/ferrofed/test/gatewaytest"
)

// reply is what a test reads of an answer besides its body (read and closed by raw).
type reply struct {
	StatusCode int
	Header     http.Header
}

// raw sends method path to g with the Authorization header value authz ("" for none),
// bypassing gatewaytest's client token, and returns the answer read.
func raw(t *testing.T, g *gatewaytest.Gateway, method, path, authz string) (*reply, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, g.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", fhir.MediaType)
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &reply{StatusCode: res.StatusCode, Header: res.Header}, body
}

// outcome checks that body is an R4 OperationOutcome whose issue code is code, and
// that it echoes no token.
func outcome(t *testing.T, body []byte, code string) {
	t.Helper()
	if err := fhirschema.Validate(body); err != nil {
		t.Fatalf("not valid R4: %v\n%s", err, body)
	}
	var oo fhir.OperationOutcome
	if err := json.Unmarshal(body, &oo); err != nil || oo.ResourceType != "OperationOutcome" || len(oo.Issue) != 1 || oo.Issue[0].Code != code {
		t.Fatalf("not an OperationOutcome of %s: %s", code, body)
	}
	if strings.Contains(string(body), "eyJ") {
		t.Fatalf("the answer echoes the token: %s", body)
	}
}

func b64(v any) string {
	data, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(data)
}

// signed is a compact JWS of claims with a key of its own under kid.
func signed(t *testing.T, kid string, claims map[string]any) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// The hostile-token matrix of the operator routes, run against the data plane: every
// token that does not verify is a 401 with its challenge and an R4 OperationOutcome;
// health and metrics ask for none.
func TestTheDataPlaneRefusesEveryTokenThatDoesNotVerify(t *testing.T) {
	m := members.Start(t, members.Options{ID: "a"})
	g := gatewaytest.Start(t, fmt.Sprintf("[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n", m.URL))
	now := time.Now()
	good := map[string]any{"iss": issuer.URL, "aud": issuer.Audience, "sub": "app", "scope": issuer.ClientScope,
		"exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for kk, vv := range good {
			c[kk] = vv
		}
		c[k] = v // nil: the claim is null, as good as absent
		return c
	}
	tok := func(claims map[string]any) string {
		s, err := g.Issuer.Token(claims)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + s
	}
	none := "Bearer " + b64(map[string]any{"alg": "none", "typ": "JWT"}) + "." + b64(good) + "."
	// HS256 keyed with the issuer's public key set: the algorithm confusion.
	pub, _ := x509.MarshalPKIXPublicKey(&mustKey(t).PublicKey)
	input := b64(map[string]any{"alg": "HS256", "typ": "JWT", "kid": "k1"}) + "." + b64(good)
	mac := hmac.New(sha256.New, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
	mac.Write([]byte(input))
	hs256 := "Bearer " + input + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	parts := strings.Split(strings.TrimPrefix(tok(good), "Bearer "), ".")
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sig[10] ^= 0xff
	badSig := "Bearer " + parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)

	cases := []struct {
		name, authz string
		status      int
	}{
		{"no token", "", 401},
		{"garbage", "Bearer garbage", 401},
		{"three parts of garbage", "Bearer a.b.c", 401},
		{"another scheme", "Basic dXNlcjpwYXNz", 401},
		{"alg none", none, 401},
		{"HS256 keyed with a public key", hs256, 401},
		{"a bad signature", badSig, 401},
		{"another key under the issuer's kid", "Bearer " + signed(t, "k1", good), 401},
		{"an unknown kid", "Bearer " + signed(t, "k9", good), 401},
		{"a wrong issuer", tok(with("iss", "https://evil.test")), 401},
		{"a wrong audience", tok(with("aud", "someone-else")), 401},
		{"expired", tok(with("exp", now.Add(-time.Hour).Unix())), 401},
		{"no expiry", tok(with("exp", nil)), 401},
		{"not valid yet", tok(with("nbf", now.Add(time.Hour).Unix())), 401},
		{"an Authorization header over 8 KiB", "Bearer " + strings.Repeat("a", 9<<10), 401},
		{"a good token", tok(good), 200},
	}
	for _, path := range []string{"/fhir/Patient", "/nodes/a/fhir/Patient/a-1"} {
		for _, c := range cases {
			t.Run(path+" "+c.name, func(t *testing.T) {
				res, body := raw(t, g, http.MethodGet, path, c.authz)
				if res.StatusCode != c.status {
					t.Fatalf("answered %d, want %d: %.300s", res.StatusCode, c.status, body)
				}
				if c.status == 200 {
					return
				}
				challenge := res.Header.Get("WWW-Authenticate")
				if !strings.HasPrefix(challenge, `Bearer realm="ferrofed"`) || strings.Contains(challenge, "eyJ") ||
					(c.authz != "" && !strings.Contains(challenge, `error="invalid_token"`) && !strings.Contains(challenge, `error="invalid_request"`)) {
					t.Fatalf("challenge %q", challenge)
				}
				outcome(t, body, "login")
			})
		}
	}
	if n := m.Requests(); n != 2 {
		t.Fatalf("the member was asked %d times, want 2 (the good tokens' only)", n)
	}
	for _, open := range []string{"/health", "/health/readiness", "/metrics"} {
		if res, body := raw(t, g, http.MethodGet, open, ""); res.StatusCode != 200 {
			t.Fatalf("%s without a token answered %d: %s", open, res.StatusCode, body)
		}
	}
}

func mustKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A token that verifies but whose scopes do not allow the request is a 403 naming the
// scope it needed, in its challenge and its OperationOutcome; the member is not asked.
func TestAMissingScopeIsA403NamingIt(t *testing.T) {
	m := members.Start(t, members.Options{ID: "a"})
	g := gatewaytest.Start(t, fmt.Sprintf("[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n", m.URL))
	for _, c := range []struct{ scope, path, needed string }{
		{"openid fhirUser", "/fhir/Patient", "user/Patient.s"},
		{"system/Observation.rs", "/fhir/Patient?name=x", "system/Patient.s"},
		{"system/Patient.s", "/nodes/a/fhir/Patient/a-1", "system/Patient.r"},
		{"patient/Observation.rs", "/nodes/a/fhir/Observation", "patient claim"},
	} {
		t.Run(c.scope+" "+c.path, func(t *testing.T) {
			res, body := raw(t, g, http.MethodGet, c.path, "Bearer "+g.Issuer.Sign(t, "app", c.scope))
			if res.StatusCode != http.StatusForbidden {
				t.Fatalf("answered %d: %s", res.StatusCode, body)
			}
			outcome(t, body, "forbidden")
			challenge := res.Header.Get("WWW-Authenticate")
			if !strings.Contains(challenge, `error="insufficient_scope"`) || !strings.Contains(string(body), c.needed) {
				t.Fatalf("challenge %q, body %s: want %s named", challenge, body, c.needed)
			}
		})
	}
	if n := m.Requests(); n != 0 {
		t.Fatalf("the member was asked %d times", n)
	}
}

// The mode follows the configuration in force: a reload that opens the data plane lets
// a request without a token through, one that requires it again refuses it.
func TestAReloadTurnsTheDataPlaneEitherWay(t *testing.T) {
	m := members.Start(t, members.Options{ID: "a"})
	tables := fmt.Sprintf("[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n", m.URL)
	g := gatewaytest.Start(t, tables)
	if res, body := raw(t, g, http.MethodGet, "/fhir/Patient", ""); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("required: answered %d: %s", res.StatusCode, body)
	}
	open, _ := gatewaytest.Config(t, tables+"[auth]\ndata_plane = \"open\"\n", gatewaytest.WithIssuer(g.Issuer))
	if w := open.Warnings(); len(w) != 1 || w[0].Key != "auth.data_plane" {
		t.Fatalf("warnings %v, want the open data plane's", w)
	}
	if err := g.Reload(open); err != nil {
		t.Fatal(err)
	}
	if res, body := raw(t, g, http.MethodGet, "/fhir/Patient", ""); res.StatusCode != http.StatusOK {
		t.Fatalf("open: answered %d: %s", res.StatusCode, body)
	}
	if err := g.Reload(g.Config); err != nil {
		t.Fatal(err)
	}
	if res, body := raw(t, g, http.MethodGet, "/fhir/Patient", ""); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("required again: answered %d: %s", res.StatusCode, body)
	}
}

// An _include of a type the token may not read is dropped from a federated search,
// and the page says so; a routed search with one is refused, the member not asked.
func TestAnIncludeTheTokenMayNotReadIsDroppedAndSaidSo(t *testing.T) {
	m := members.Start(t, members.Options{ID: "a"})
	g := gatewaytest.Start(t, fmt.Sprintf("[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n", m.URL))
	tok := "Bearer " + g.Issuer.Sign(t, "app", "system/Observation.rs")
	res, body := raw(t, g, http.MethodGet, "/fhir/Observation?code=x&_include=Observation:patient", tok)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("answered %d: %s", res.StatusCode, body)
	}
	if err := fhirschema.ValidateFederated(body); err != nil {
		t.Fatalf("not R4: %v", err)
	}
	if !strings.Contains(string(body), `"code":"suppressed"`) || !strings.Contains(string(body), "dropped _include=Observation:patient") {
		t.Fatalf("no outcome entry says what was dropped: %s", body)
	}
	if q := m.LastRequest().RawQuery; strings.Contains(q, "_include") || !strings.Contains(q, "code=x") {
		t.Fatalf("the member was asked %q", q)
	}
	before := m.Requests()
	res, body = raw(t, g, http.MethodGet, "/nodes/a/fhir/Observation?code=x&_include=Observation:patient", tok)
	if res.StatusCode != http.StatusForbidden || m.Requests() != before {
		t.Fatalf("routed: answered %d, the member asked %d times: %s", res.StatusCode, m.Requests()-before, body)
	}
	outcome(t, body, "forbidden")
}

// The patient-context table: a token with patient-level scopes and a patient claim
// reaches that patient's data only. A search of a compartment type gets the patient
// added (the member is asked for it), one naming another patient is a 403, a read of
// another Patient a 404 (nothing disclosed), a read of a compartment resource by id
// goes to the member only once the member finds it in the patient's compartment (a 404
// otherwise), a type outside the compartment is searched as asked; a token without the
// claim or a write is refused. No refused request reaches the member.
func TestThePatientContextTable(t *testing.T) {
	// Observation/a-1's subject is Patient/a-1, Observation/a-2's Patient/a-2.
	m := members.Start(t, members.Options{ID: "a", Subjects: true})
	g := gatewaytest.Start(t, fmt.Sprintf("[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n", m.URL))
	token := func(scope, patient string) string {
		claims := map[string]any{"sub": "pat", "scope": scope}
		if patient != "" {
			claims["patient"] = patient
		}
		tok, err := g.Issuer.Token(claims)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	for _, c := range []struct {
		name, scope, patient, method, path string
		status                             int
		asked                              string // a parameter the member must have been sent, "k=v"
	}{
		{"a federated search gets the patient", "patient/*.rs", "a.a-1", "GET", "/fhir/Observation?code=x", 200, "subject=Patient/a-1"},
		{"a routed search gets the patient", "patient/Observation.rs", "a.a-1", "GET", "/nodes/a/fhir/Observation?code=x", 200, "subject=Patient/a-1"},
		{"a Patient search gets its _id", "patient/Patient.rs", "a.a-1", "GET", "/fhir/Patient?name=x", 200, "_id=a-1"},
		{"a search naming the patient", "patient/*.rs", "a.a-1", "GET", "/fhir/Observation?subject=Patient/a.a-1", 200, "subject=Patient/a-1"},
		{"a search naming another patient", "patient/*.rs", "a.a-1", "GET", "/fhir/Observation?subject=Patient/a.a-2", 403, ""},
		{"a routed search naming another patient", "patient/*.rs", "a.a-1", "GET", "/nodes/a/fhir/Encounter?patient=Patient/a-2", 403, ""},
		{"a compartment search of another patient", "patient/*.rs", "a.a-1", "GET", "/nodes/a/fhir/Patient/a-2/Observation", 403, ""},
		{"a read of the patient", "patient/Patient.r", "a.a-1", "GET", "/nodes/a/fhir/Patient/a-1", 200, ""},
		{"a read of another patient", "patient/Patient.r", "a.a-1", "GET", "/nodes/a/fhir/Patient/a-2", 404, ""},
		{"a read of the patient's Observation", "patient/*.rs", "a.a-1", "GET", "/nodes/a/fhir/Observation/a-1", 200, "=confirmed"},
		{"a read of another patient's Observation", "patient/*.rs", "a.a-1", "GET", "/nodes/a/fhir/Observation/a-2", 404, "=confirmed"},
		{"a vread of the patient's Encounter", "patient/Encounter.r", "a.a-2", "GET", "/nodes/a/fhir/Encounter/a-2/_history/1", 200, "=confirmed"},
		{"a restricted read the restriction finds", "patient/Observation.r?code=x", "a.a-1", "GET", "/nodes/a/fhir/Observation/a-1", 200, "=confirmed"},
		{"a read of another patient's Observation under a restriction", "patient/Observation.r?code=x", "a.a-1", "GET", "/nodes/a/fhir/Observation/a-2", 404, "=confirmed"},
		{"a system read the restriction does not find", "system/Observation.r?subject=Patient/a-1", "", "GET", "/nodes/a/fhir/Observation/a-2", 404, "=confirmed"},
		{"a federated read of the patient's Observation", "patient/*.rs", "a.a-1", "GET", "/fhir/Observation/a.a-1", 200, "=confirmed"},
		{"a federated read of another patient's Observation", "patient/*.rs", "a.a-1", "GET", "/fhir/Observation/a.a-2", 404, "=confirmed"},
		{"a federated read of the patient", "patient/Patient.r", "a.a-1", "GET", "/fhir/Patient/a.a-1", 200, ""},
		{"a federated read of another patient", "patient/Patient.r", "a.a-1", "GET", "/fhir/Patient/a.a-2", 404, ""},
		{"a patient claim that is no federated id", "patient/*.rs", "a-1", "GET", "/fhir/Observation?code=x", 403, ""},
		// The member double holds no Practitioner: it answers what it answers (0: any
		// status), asked as the client asked.
		{"a type outside the compartment", "patient/*.rs", "a.a-1", "GET", "/nodes/a/fhir/Practitioner?name=x", 0, "name=x"},
		{"no patient claim", "patient/*.rs", "", "GET", "/fhir/Observation?code=x", 403, ""},
		{"a write", "patient/*.cruds", "a-1", "DELETE", "/nodes/a/fhir/Patient/a-1", 403, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.asked == "=confirmed" {
				confirmedRead(t, g, m, c.path, token(c.scope, c.patient), c.status)
				return
			}
			before := m.Requests()
			res, body := raw(t, g, c.method, c.path, token(c.scope, c.patient))
			if c.status == 0 && m.Requests() == before {
				t.Fatalf("answered %d without asking the member: %.300s", res.StatusCode, body)
			}
			if c.status != 0 && res.StatusCode != c.status {
				t.Fatalf("answered %d, want %d: %.300s", res.StatusCode, c.status, body)
			}
			if c.status == 403 || c.status == 404 {
				if m.Requests() != before {
					t.Fatal("a refused request reached the member")
				}
				code := map[int]string{403: "forbidden", 404: "not-found"}[c.status]
				outcome(t, body, code)
				return
			}
			if c.asked != "" {
				k, v, _ := strings.Cut(c.asked, "=")
				got := m.LastRequest()
				if q, _ := url.ParseQuery(got.RawQuery); !slices.Contains(q[k], v) {
					t.Fatalf("the member was asked %s?%s, want %s", got.Path, got.RawQuery, c.asked)
				}
			}
		})
	}
}

// confirmedRead reads path (a routed read of one resource by id) with authz and checks
// that the member was first asked to find it by a search for its id, with what the
// token confines it to, and then read only when it was found (status 200), the read
// answered 404 otherwise.
func confirmedRead(t *testing.T, g *gatewaytest.Gateway, m *members.Server, path, authz string, status int) {
	t.Helper()
	before := len(m.Log())
	res, body := raw(t, g, http.MethodGet, path, authz)
	if res.StatusCode != status {
		t.Fatalf("answered %d, want %d: %.300s", res.StatusCode, status, body)
	}
	log := m.Log()[before:]
	// The member's own id: routed, or the federated id's (a.{id}).
	segs := strings.Split(strings.TrimPrefix(strings.TrimPrefix(path, "/nodes/a"), "/fhir/"), "/")
	segs[1] = strings.TrimPrefix(segs[1], "a.")
	if len(log) == 0 || log[0].Path != "/fhir/"+segs[0] || log[0].Query.Get("_id") != segs[1] {
		t.Fatalf("the member was not asked to find %s/%s first: %+v", segs[0], segs[1], log)
	}
	if status == http.StatusNotFound {
		outcome(t, body, "not-found")
		if len(log) != 1 {
			t.Fatalf("a read the member did not find was sent on: %d requests", len(log))
		}
		return
	}
	if len(log) != 2 || log[1].Path != "/fhir/"+strings.Join(segs, "/") {
		t.Fatalf("the read was not sent on once found: %+v", log)
	}
}

// A member that cannot say whether it holds what a confined read asks for (it fails the
// search) is the gateway's 502, and the read is not sent: a read is never let through
// on a question left unanswered.
func TestAConfinedReadTheMemberCannotConfirmIsA502(t *testing.T) {
	m := members.Start(t, members.Options{ID: "a", Subjects: true, Knobs: double.Knobs{Status: http.StatusInternalServerError}})
	g := gatewaytest.Start(t, fmt.Sprintf("[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n", m.URL))
	tok, err := g.Issuer.Token(map[string]any{"sub": "pat", "scope": "patient/*.rs", "patient": "a.a-1"})
	if err != nil {
		t.Fatal(err)
	}
	res, body := raw(t, g, http.MethodGet, "/nodes/a/fhir/Observation/a-1", "Bearer "+tok)
	if res.StatusCode != http.StatusBadGateway {
		t.Fatalf("answered %d, want 502: %.300s", res.StatusCode, body)
	}
	outcome(t, body, "transient")
	if strings.Contains(string(body), m.URL) || strings.Contains(string(body), m.Opts.Marker) {
		t.Fatalf("the 502 passes on the member's address or its body: %s", body)
	}
	if log := m.Log(); len(log) != 1 || log[0].Path != "/fhir/Observation" {
		t.Fatalf("the member was sent %+v, want only the search that would have found the read", log)
	}
}

// A next link asks for a token as every request of the data plane does: without one
// it is the door's 401, the member not asked; with the token of the caller it was made
// for it is the next page (its binding to that caller is gateway/federation's).
func TestANextLinkWithoutATokenIsRefusedAtTheDoor(t *testing.T) {
	m := members.Start(t, members.Options{ID: "a", Entries: 5})
	g := gatewaytest.Start(t, fmt.Sprintf("[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n", m.URL))
	tok := "Bearer " + g.Issuer.Client(t)
	res, body := raw(t, g, http.MethodGet, "/fhir/Patient?_count=2", tok)
	var page struct {
		Link []struct{ Relation, URL string }
	}
	if err := json.Unmarshal(body, &page); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("the first page: %d %s", res.StatusCode, body)
	}
	next := ""
	for _, l := range page.Link {
		if l.Relation == "next" {
			next = strings.TrimPrefix(l.URL, g.URL)
		}
	}
	if !strings.HasPrefix(next, "/fhir/Patient?_page=") {
		t.Fatalf("no next link: %s", body)
	}
	before := m.Requests()
	res, body = raw(t, g, http.MethodGet, next, "")
	if res.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer ") || m.Requests() != before {
		t.Fatalf("without a token: answered %d, the member asked %d times: %s", res.StatusCode, m.Requests()-before, body)
	}
	outcome(t, body, "login")
	if res, body := raw(t, g, http.MethodGet, next, tok); res.StatusCode != http.StatusOK {
		t.Fatalf("with its caller's token: answered %d: %s", res.StatusCode, body)
	}
}

// SMART discovery is read before a client holds a token: it alone asks for none on a
// required data plane; the statement, another path beside it and a member's own
// discovery path still do.
func TestSMARTDiscoveryAsksForNoToken(t *testing.T) {
	m := members.Start(t, members.Options{ID: "a"})
	g := gatewaytest.Start(t, fmt.Sprintf("[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n", m.URL),
		gatewaytest.WithIssuerKeys("token_endpoint = \"https://auth.test/token\"\n"))
	res, body := raw(t, g, http.MethodGet, "/fhir/.well-known/smart-configuration", "")
	var c struct {
		TokenEndpoint string `json:"token_endpoint"`
	}
	if err := json.Unmarshal(body, &c); err != nil || res.StatusCode != http.StatusOK || c.TokenEndpoint != "https://auth.test/token" {
		t.Fatalf("discovery without a token answered %d: %s", res.StatusCode, body)
	}
	before := m.Requests()
	for _, path := range []string{"/fhir/metadata", "/fhir/.well-known/other", "/fhir/.well-known/smart-configuration/more", "/nodes/a/fhir/.well-known/smart-configuration"} {
		res, body := raw(t, g, http.MethodGet, path, "")
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without a token answered %d: %s", path, res.StatusCode, body)
			continue
		}
		outcome(t, body, "login")
	}
	if m.Requests() != before {
		t.Fatal("a request without a token reached the member")
	}
}
