package searchquery

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestACallerIsAKeyedHashOfItsIssuerAndSubject(t *testing.T) {
	k, other := Key("a-key-of-more-than-thirty-two-bytes-1"), Key("a-key-of-more-than-thirty-two-bytes-2")
	app := k.Caller("https://issuer.test", "app")
	if app != k.Caller("https://issuer.test", "app") || app != Key(append([]byte(nil), k...)).Caller("https://issuer.test", "app") {
		t.Fatal("the same caller under the same key hashes to two values: replicas sharing a key would refuse each other's links")
	}
	for what, c := range map[string]string{
		"another subject":                    k.Caller("https://issuer.test", "mallory"),
		"another issuer":                     k.Caller("https://other.test", "app"),
		"another key":                        other.Caller("https://issuer.test", "app"),
		"anonymous":                          k.Caller("", "anonymous"),
		"the issuer and subject run on":      k.Caller("https://issuer.testapp", ""),
		"a subject that spells the issuer's": k.Caller("https://issuer.tes", "t\x00app"),
	} {
		if c == app {
			t.Errorf("%s hashes as the caller does", what)
		}
	}
	if strings.Contains(app, "app") || strings.Contains(app, "issuer") {
		t.Fatalf("the caller's value %q names it", app)
	}
}

func TestATokenIsForItsCallerUntilItExpires(t *testing.T) {
	k := Key("a-key-of-more-than-thirty-two-bytes-1")
	now := time.Now()
	tok := Token{Caller: k.Caller("https://issuer.test", "app"), Expires: now.Add(time.Minute).UnixMilli()}
	if err := tok.For(k.Caller("https://issuer.test", "app"), now); err != nil {
		t.Fatalf("its caller, before its expiry: %v", err)
	}
	cases := []struct {
		name         string
		caller       string
		at           time.Time
		status       int
		code, reason string
	}{
		{"another caller", k.Caller("https://issuer.test", "mallory"), now, http.StatusUnauthorized, "security", "another caller"},
		{"another caller past the expiry is told only that", k.Caller("", "anonymous"), now.Add(time.Hour), http.StatusUnauthorized, "security", "another caller"},
		{"its caller at its expiry", tok.Caller, now.Add(time.Minute), http.StatusBadRequest, "expired", "expired"},
		{"its caller past its expiry", tok.Caller, now.Add(time.Hour), http.StatusBadRequest, "expired", "expired"},
	}
	for _, tc := range cases {
		err := tok.For(tc.caller, tc.at)
		var bad BadToken
		if !errors.As(err, &bad) {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if status, code := bad.Refusal(); status != tc.status || code != tc.code || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: %d %s %q, want %d %s", tc.name, status, code, err, tc.status, tc.code)
		}
	}
	if status, code := (BadToken{Reason: "it is malformed"}).Refusal(); status != http.StatusBadRequest || code != "invalid" {
		t.Fatalf("a malformed token is refused %d %s", status, code)
	}
}

// A token must name its caller and its expiry: one without either, and one of the
// layout before tokens were bound (version 1), is refused though its MAC is right.
func TestATokenWithoutACallerOrAnExpiryIsRefused(t *testing.T) {
	k := Key("a-key-of-more-than-thirty-two-bytes-1")
	known := func(id string) bool { return id == "a" }
	sign := func(body string) string {
		payload := base64.RawURLEncoding.EncodeToString([]byte(body))
		return payload + "." + base64.RawURLEncoding.EncodeToString(k.MAC(payload))
	}
	const m = `"t":"Patient","n":10,"m":[{"id":"a","c":"/Patient"}]`
	for name, body := range map[string]string{
		"no caller":      `{"v":2,"exp":1,` + m + `}`,
		"no expiry":      `{"v":2,"who":"c",` + m + `}`,
		"neither":        `{"v":2,` + m + `}`,
		"version 1":      `{"v":1,` + m + `}`,
		"version 1 with": `{"v":1,"who":"c","exp":1,` + m + `}`,
	} {
		if _, err := k.Decode(sign(body), 1, known, 1000); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	good, err := k.Encode(Token{Type: "Patient", Count: 10, Members: []TokenMember{{ID: "a", Cursor: "/Patient"}}, Caller: "c", Expires: 1})
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := k.Decode(good, 1, known, 1000); err != nil || tok.Caller != "c" || tok.Expires != 1 {
		t.Fatalf("a bound token: %+v %v", tok, err)
	}
}

// A refused token's answer names _page; a 401 carries its challenge, as HTTP asks.
func TestARefusedTokenIsAnsweredNamingPage(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{BadToken{Reason: "it is malformed"}, http.StatusBadRequest, "invalid"},
		{BadToken{Reason: "it was made for another caller", Status: http.StatusUnauthorized, Code: "security"}, http.StatusUnauthorized, "security"},
		{BadToken{Reason: "it has expired", Status: http.StatusBadRequest, Code: "expired"}, http.StatusBadRequest, "expired"},
		{errors.New("not a BadToken"), http.StatusBadRequest, "invalid"},
	} {
		rec := httptest.NewRecorder()
		Refuse(rec, tc.err)
		body := rec.Body.String()
		if rec.Code != tc.status || !strings.Contains(body, `"code":"`+tc.code+`"`) || !strings.Contains(body, "search parameter _page") {
			t.Errorf("%v: answered %d %s", tc.err, rec.Code, body)
		}
		if challenge := rec.Header().Get("WWW-Authenticate"); (tc.status == http.StatusUnauthorized) != strings.HasPrefix(challenge, "Bearer ") {
			t.Errorf("%v: challenge %q on a %d", tc.err, challenge, rec.Code)
		}
	}
}
