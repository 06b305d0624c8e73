package process

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/auth"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
	"github.com/ferrofed/ferrofed/test/doubles/openid"
)

// The clients of the provider in TestARealOpenIDProvidersTokensThroughTheBinary.
var openIDClients = []openid.Client{
	{ID: "patients", Secret: "patients-secret", Scopes: []string{"system/Patient.rs"}},
	{ID: "reader", Secret: "reader-secret", Scopes: []string{"system/*.read"}},
	{ID: "observations", Secret: "observations-secret", Scopes: []string{"system/Observation.rs"}},
	{ID: "elsewhere", Secret: "elsewhere-secret", Scopes: []string{"system/*.read"}, Audience: "another-api"},
}

// A real OpenID provider, not a token signed by the test: the binary trusts it by its
// [[auth.issuers]] table (its jwks_url over https, verified against its ca_file), and
// its clients get their tokens by the client_credentials grant. Their SMART scopes
// decide what they may do (docs/security.md, "Scopes on the data plane"), a token for
// another audience or from a provider the gateway does not trust is a 401, and a new
// signing key is taken up at its first token once the refetch interval has passed
// (docs/security.md, "Operator tokens").
func TestARealOpenIDProvidersTokensThroughTheBinary(t *testing.T) {
	op := openid.Start(t, openid.Options{Clients: openIDClients})
	m := members.Start(t, members.Options{ID: "a"})
	port := freePort(t)
	path := filepath.Join(t.TempDir(), "ferrofed.toml")
	writeFile(t, path, fmt.Sprintf("[server]\nlisten = \"127.0.0.1:%d\"\ntermination_message_path = \"\"\n[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n\n%s",
		port, m.URL, op.Table()))
	serve(t, path)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitReady(t, base)
	token := func(id string, scopes ...string) string {
		for _, c := range openIDClients {
			if c.ID == id {
				return op.ClientToken(t, c.ID, c.Secret, scopes...)
			}
		}
		t.Fatalf("no client %q", id)
		return ""
	}

	// The first token fetches the key set; the refetch interval starts there.
	if op.KeySetsServed() != 0 {
		t.Fatal("the key set was fetched before any token needed it")
	}
	expectAllowed(t, m, base, token("patients"), "/fhir/Patient?name=x")
	fetched := time.Now()
	if n := op.KeySetsServed(); n != 1 {
		t.Fatalf("the key set was served %d times for the first token, want 1", n)
	}
	// Each client's token of the first key, and one of the new key after a rotation:
	// within the interval since the last fetch the gateway does not fetch the unknown
	// key, and the tokens of the known one keep verifying.
	tokens := map[string]string{}
	for _, c := range openIDClients {
		tokens[c.ID] = token(c.ID)
	}
	tokens["observations"] = token("observations", "system/Observation.rs")
	retired := token("patients") // presented only once the new key is taken up
	op.RotateKey(t)
	rotated := token("patients")
	expectRefused(t, m, base, rotated, "/fhir/Patient?name=x", 401, auth.ErrUnknownKey.Description)

	t.Run("the scopes the provider granted decide", func(t *testing.T) {
		expectAllowed(t, m, base, tokens["patients"], "/nodes/a/fhir/Patient/a-1")
		expectAllowed(t, m, base, tokens["reader"], "/fhir/Observation?code=x")
		expectAllowed(t, m, base, tokens["reader"], "/nodes/a/fhir/Patient/a-1")
		expectAllowed(t, m, base, tokens["observations"], "/fhir/Observation?code=x")
		expectRefused(t, m, base, tokens["observations"], "/fhir/Patient?name=x", 403, "system/Patient.s")
		expectRefused(t, m, base, tokens["patients"], "/nodes/a/fhir/Observation/o-1", 403, "system/Observation.r")
	})
	t.Run("a token the gateway must not take", func(t *testing.T) {
		expectRefused(t, m, base, tokens["elsewhere"], "/fhir/Observation?code=x", 401, auth.ErrAudience.Description)
		other := openid.Start(t, openid.Options{Clients: openIDClients})
		expectRefused(t, m, base, other.ClientToken(t, "reader", "reader-secret"), "/fhir/Observation?code=x", 401, auth.ErrIssuer.Description)
		// The provider itself grants nothing it should not.
		var te *openid.TokenError
		if _, err := op.Token("reader", "patients-secret"); !errors.As(err, &te) || te.Code != "invalid_client" {
			t.Fatalf("a wrong secret: %v, want invalid_client", err)
		}
		if _, err := op.Token("patients", "patients-secret", "system/*.read"); !errors.As(err, &te) || te.Code != "invalid_scope" {
			t.Fatalf("a scope the client may not have: %v, want invalid_scope", err)
		}
	})
	if n := op.KeySetsServed(); n != 1 {
		t.Fatalf("the key set was served %d times within the refetch interval, want 1", n)
	}

	t.Run("the rotated key once the refetch interval has passed", func(t *testing.T) {
		time.Sleep(time.Until(fetched.Add(auth.DefaultMinRefetchInterval + 50*time.Millisecond)))
		expectAllowed(t, m, base, rotated, "/fhir/Patient?name=x")
		if n := op.KeySetsServed(); n != 2 {
			t.Fatalf("the key set was served %d times, want 2: one refetch for the new key", n)
		}
		// The provider keeps the retired key published: a token it signed, first
		// presented now, verifies against the refetched set.
		expectAllowed(t, m, base, retired, "/fhir/Patient?name=x")
		if n := op.KeySetsServed(); n != 2 {
			t.Fatalf("the key set was served %d times, want 2", n)
		}
	})
}

// send GETs path with tok and returns the answer's status, header and body, and
// whether member m was asked.
func send(t *testing.T, m *members.Server, base, tok, path string) (int, http.Header, []byte, bool) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "application/fhir+json")
	before := m.Requests()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, body, m.Requests() > before
}

// expectAllowed asserts that GET path with tok is answered 200, the member asked.
func expectAllowed(t *testing.T, m *members.Server, base, tok, path string) {
	t.Helper()
	status, _, body, asked := send(t, m, base, tok, path)
	if status != http.StatusOK || !asked {
		t.Fatalf("GET %s answered %d (the member asked: %v), want 200 from the member: %.300s", path, status, asked, body)
	}
}

// expectRefused asserts that GET path with tok is refused with status (401 or 403), an
// R4 OperationOutcome saying named and a challenge (a 403's naming named as its scope),
// the member not asked.
func expectRefused(t *testing.T, m *members.Server, base, tok, path string, want int, named string) {
	t.Helper()
	status, header, body, asked := send(t, m, base, tok, path)
	if status != want || asked {
		t.Fatalf("GET %s answered %d (the member asked: %v), want %d: %.300s", path, status, asked, want, body)
	}
	if err := fhirschema.Validate(body); err != nil || !strings.Contains(string(body), `"OperationOutcome"`) || !strings.Contains(string(body), named) {
		t.Fatalf("GET %s: the refusal is not an R4 OperationOutcome naming %q (%v): %s", path, named, err, body)
	}
	challenge := header.Get("WWW-Authenticate")
	wantCode := map[int]string{401: `error="invalid_token"`, 403: `error="insufficient_scope"`}[want]
	if !strings.HasPrefix(challenge, "Bearer ") || !strings.Contains(challenge, wantCode) {
		t.Fatalf("GET %s: challenge %q, want a Bearer challenge with %s", path, challenge, wantCode)
	}
	if want == http.StatusForbidden && !strings.Contains(challenge, fmt.Sprintf("scope=%q", named)) {
		t.Fatalf("GET %s: challenge %q does not name scope %q", path, challenge, named)
	}
}
