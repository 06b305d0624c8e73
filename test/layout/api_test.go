package layout

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// maxAPIDeps bounds the packages `go list -deps ./api/...` lists: the closure of
// k8s.io/api/core/v1, which the types embed, is 269; the API package once linked the
// gateway's configuration, its admission server and controller-runtime, 754.
const maxAPIDeps = 300

// apiMustNotReach are the import path prefixes no package of api/ may depend on, even
// indirectly: the gateway, its TOML, JOSE and metrics libraries, and controller-runtime.
// The mapping of a spec onto the gateway is internal/gatewayspec's, the webhook
// internal/webhook's (docs/architecture.md, "The parts").
var apiMustNotReach = []string{
	module + "/gateway/",
	module + "/internal/",
	"github.com/pelletier/go-toml",
	"github.com/go-jose/go-jose",
	"github.com/prometheus/",
	"sigs.k8s.io/controller-runtime",
}

// httpCarriers may import net/http in the API's closure: apimachinery's
// meta/v1 brings it (util/net, util/runtime, and x/net's http2 under them), as it does
// to every Kubernetes API package, k8s.io/api's included. Nothing else may.
var httpCarriers = []string{"k8s.io/apimachinery/", "golang.org/x/net/"}

// TestTheAPIIsTypesOnly keeps api/ a package of types (docs/architecture.md, "What may
// import what"): a client of the API links its types and apimachinery, not the gateway,
// not an HTTP server, not the operator's libraries.
func TestTheAPIIsTypesOnly(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports", "./api/...")
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./api/...: %v", err)
	}
	var deps []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		deps = append(deps, p)
	}
	if len(deps) < 100 {
		t.Fatalf("go list -deps ./api/... listed %d packages: too few to be the API's closure", len(deps))
	}
	if len(deps) >= maxAPIDeps {
		t.Errorf("./api/... depends on %d packages, want fewer than %d: a package it imports links more than types", len(deps), maxAPIDeps)
	}
	for _, p := range deps {
		for _, prefix := range apiMustNotReach {
			if strings.HasPrefix(p.ImportPath, prefix) {
				t.Errorf("./api/... depends on %s: the API holds types only", p.ImportPath)
			}
		}
		if !carriesHTTP(p.ImportPath) {
			for _, imp := range p.Imports {
				if imp == "net/http" {
					t.Errorf("%s, in the closure of ./api/..., imports net/http: the API serves nothing", p.ImportPath)
				}
			}
		}
	}
}

func carriesHTTP(importPath string) bool {
	for _, prefix := range httpCarriers {
		if strings.HasPrefix(importPath, prefix) {
			return true
		}
	}
	return false
}
