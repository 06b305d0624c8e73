package auth

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// FuzzVerify feeds arbitrary Authorization headers to a verifier: none may panic, and
// none but a token signed by the issuer's key may pass. `go test` runs the seeds;
// `go test -fuzz FuzzVerify ./gateway/auth` explores.
func FuzzVerify(f *testing.F) {
	rk, _ := testKeys(f)
	file := filepath.Join(f.TempDir(), "jwks.json")
	if err := os.WriteFile(file, jwks(f, jose.JSONWebKey{Key: rk, KeyID: "rsa-1"}), 0o600); err != nil {
		f.Fatal(err)
	}
	v, err := New([]config.Issuer{{Issuer: testIssuer, Audience: testAudience, JWKSFile: file, OperatorScope: testScope}}, Options{})
	if err != nil {
		f.Fatal(err)
	}
	good := sign(f, jose.RS256, rk, "rsa-1", goodClaims(time.Now()))
	for _, seed := range []string{
		"", "Bearer", "Bearer ", "Bearer a.b.c", "bearer " + good, "Bearer " + good + "x",
		"Bearer " + good[:len(good)/2], "Bearer ..", "Bearer eyJhbGciOiJub25lIn0.e30.",
		"Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6InJzYS0xIn0.eyJpc3MiOiJodHRwczovL2lzc3Vlci50ZXN0In0.AAAA",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header string) {
		p, e := v.Verify(context.Background(), header)
		if (p == nil) == (e == nil) {
			t.Fatalf("Verify(%q) = %v, %v: exactly one must be set", header, p, e)
		}
		if e != nil && e.Status != 401 && e.Status != 403 {
			t.Fatalf("Verify(%q) refused with %d", header, e.Status)
		}
	})
}
