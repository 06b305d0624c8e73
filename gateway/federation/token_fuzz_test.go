package federation

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/searchquery"
)

// FuzzPageToken feeds the page token decoder what a client can send: any string as
// the token (sign false), or any content signed with the gateway's key (sign true),
// which is what a client that knew the key could send. It must never panic, and a
// token it accepts must only ever ask under a configured member's base.
func FuzzPageToken(f *testing.F) {
	for _, seed := range []struct {
		s    string
		sign bool
	}{
		{`{"v":2,"who":"c1","exp":1,"t":"Patient","n":10,"m":[{"id":"a","c":"/Patient?_count=10&_offset=10"}]}`, true},
		{`{"v":2,"who":"c1","exp":1,"t":"Patient","n":10,"s":"-birthdate,_id","tot":67,"m":[{"id":"a","c":"/Patient?x=1","o":3},{"id":"b","c":"/Patient"}]}`, true},
		{`{"v":2,"who":"c1","exp":1,"t":"Patient","n":10,"m":[{"id":"a","c":"/../admin"}]}`, true},
		{`{"v":2,"who":"c1","exp":1,"t":"Patient","n":10,"m":[{"id":"a","c":"/%2e%2e/admin"}]}`, true},
		{`{"v":2,"who":"c1","exp":1,"t":"Patient","n":10,"m":[{"id":"a","c":"//evil.example/x"}]}`, true},
		{`{"v":2,"who":"c1","exp":1,"t":"Patient","n":10,"m":[{"id":"c","c":"/Patient"}]}`, true},
		{`{"v":3,"t":"Patient","n":10,"m":[]}`, true},
		// The layout before tokens were bound to a caller, and the new one without one.
		{`{"v":1,"t":"Patient","n":10,"m":[{"id":"a","c":"/Patient"}]}`, true},
		{`{"v":2,"t":"Patient","n":10,"m":[{"id":"a","c":"/Patient"}]}`, true},
		{`not json`, true},
		{`eyJ2IjoxfQ.AAAA`, false},
		{`..`, false},
		{``, false},
	} {
		f.Add(seed.s, seed.sign)
	}
	key := searchquery.Key("fuzz-key-0123456789abcdef0123456789abcdef")
	reg, err := loadRegistry(config.Registry{Members: []config.Member{
		{ID: "a", QueryEndpoint: "http://a.test/fhir"},
		{ID: "b", QueryEndpoint: "https://b.test:8443/base/fhir/"},
	}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string, sign bool) {
		tok := s
		if sign {
			payload := base64.RawURLEncoding.EncodeToString([]byte(s))
			tok = payload + "." + base64.RawURLEncoding.EncodeToString(key.MAC(payload))
		}
		pt, err := decodeToken(key, tok, reg, 1000)
		if err != nil {
			return
		}
		for _, m := range pt.Members {
			mem := reg.byID[m.ID]
			u, err := url.Parse(mem.cursorURL(m.Cursor))
			if err != nil {
				t.Fatalf("cursor %q makes no URL: %v", m.Cursor, err)
			}
			base := strings.TrimSuffix(mem.base.Path, "/") + "/"
			if u.Scheme != mem.base.Scheme || u.Host != mem.base.Host || !strings.HasPrefix(u.Path, base) || strings.Contains(u.Path, "/../") || strings.HasSuffix(u.Path, "/..") {
				t.Fatalf("an accepted token asks %s, outside %s", u, mem.base)
			}
		}
		again, err := key.Encode(pt)
		if err != nil {
			t.Fatalf("an accepted token does not encode again: %v", err)
		}
		if _, err := decodeToken(key, again, reg, 1000); err != nil {
			t.Fatalf("a token the gateway made is refused: %v", err)
		}
	})
}
