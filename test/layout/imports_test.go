// Package layout checks the import rules of docs/architecture.md ("What may import
// what") on the real package graph, as `go list` reports it.
package layout

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/ferrofed/ferrofed"

// allowed lists, per package, the ferrofed packages it may import directly. A package
// missing from the table may not be imported by a gateway package and imports freely
// itself only when it is main or under test/ or hack/.
var allowed = map[string][]string{
	"gateway/lifecycle":    {},
	"gateway/config":       {"gateway/lifecycle"},
	"gateway/health":       {"gateway/lifecycle"},
	"gateway/dependencies": {},
	"gateway/scrub":        {},
	"gateway/auth":         {"gateway/config"},
	"gateway/access":       {"gateway/auth", "gateway/bindings/patient", "gateway/config", "gateway/fhir", "gateway/identity", "gateway/proxy", "gateway/smart"},
	"gateway/healthcheck":  {"gateway/config", "gateway/health"},
	"gateway/server":       {"gateway/config", "gateway/health", "gateway/lifecycle"},
	"gateway/federation": {"gateway/auth", "gateway/bindings/audit", "gateway/bindings/patient", "gateway/calllimit", "gateway/capability", "gateway/config",
		"gateway/dependencies", "gateway/fhir", "gateway/health", "gateway/identity", "gateway/outbound", "gateway/proxy", "gateway/scrub", "gateway/searchquery", "gateway/searchset", "gateway/smart", "gateway/tracing"},
	"gateway/storedquery": {"gateway/bindings", "gateway/bindings/audit", "gateway/config", "gateway/federation", "gateway/health", "gateway/outbound"},
	// The parts the data plane is built from (split out of gateway/federation).
	"gateway/fhir":     {},
	"gateway/outbound": {"gateway/dependencies", "gateway/tracing"},
	// OpenTelemetry traces: the provider, the allow-list, the server spans, the drain's span.
	"gateway/tracing":     {"gateway/config", "gateway/lifecycle"},
	"gateway/proxy":       {"gateway/fhir", "gateway/scrub"},
	"gateway/searchquery": {"gateway/fhir", "gateway/proxy"},
	"gateway/calllimit":   {"gateway/config", "gateway/fhir", "gateway/proxy"},
	"gateway/capability":  {"gateway/config", "gateway/fhir", "gateway/searchquery", "gateway/smart"},
	"gateway/searchset":   {"gateway/fhir", "gateway/outbound"},
	"gateway/identity":    {"gateway/fhir"},
	// SMART on FHIR authorization's logic: scopes, decisions, the patient compartment.
	"gateway/smart": {},
	// The API is types only (api_test.go, TestTheAPIIsTypesOnly); what maps a spec
	// onto the gateway is internal/gatewayspec, the webhook serving it internal/webhook.
	"api/v1alpha1":         {},
	"internal/gatewayspec": {"api/v1alpha1", "gateway/config", "gateway/lifecycle"},
	"internal/webhook":     {"api/v1alpha1", "internal/gatewayspec"},
	// The composition root: every part of the gateway, made and put together.
	"gateway/assemble": {"gateway/access", "gateway/auth", "gateway/bindings", "gateway/bindings/audit", "gateway/bindings/mcsd", "gateway/bindings/patient",
		"gateway/bindings/pmir", "gateway/config", "gateway/dependencies", "gateway/federation", "gateway/server", "gateway/storedquery", "gateway/tracing"},
	"controllers": {"api/v1alpha1", "gateway/config", "gateway/lifecycle", "internal/gatewayspec", "internal/webhook"},
	// The kubectl plugin: it prints what the operator reports, and checks a manifest
	// with the operator's own rules and builders.
	"cmd/kubectl-ferrofed": {"api/v1alpha1", "controllers", "internal/gatewayspec"},

	// The bindings (gateway/bindings/<binding>/...).
	"gateway/bindings": {"gateway/config", "gateway/dependencies", "gateway/outbound", "gateway/scrub", "gateway/tracing"},
	"gateway/bindings/audit": {"gateway/bindings", "gateway/bindings/audit/deliver", "gateway/bindings/audit/spool", "gateway/lifecycle",
		"gateway/config", "gateway/dependencies", "gateway/tracing"},
	"gateway/bindings/audit/spool":   {"gateway/dependencies"},
	"gateway/bindings/audit/deliver": {"gateway/bindings/audit/spool"},
	"gateway/bindings/pixm":          {"gateway/bindings", "gateway/config", "gateway/dependencies"},
	"gateway/bindings/pdqm":          {"gateway/bindings", "gateway/config", "gateway/dependencies"},
	"gateway/bindings/authzen":       {"gateway/bindings", "gateway/config", "gateway/dependencies"},
	"gateway/bindings/xcpd":          {"gateway/bindings", "gateway/config", "gateway/dependencies"},
	"gateway/bindings/pmir":          {"gateway/auth", "gateway/bindings", "gateway/config", "gateway/dependencies", "gateway/fhir"},
	"gateway/bindings/patient": {"gateway/bindings", "gateway/bindings/authzen", "gateway/bindings/pdqm", "gateway/bindings/pixm",
		"gateway/bindings/xcpd", "gateway/config", "gateway/dependencies", "gateway/fhir", "gateway/scrub", "gateway/smart", "gateway/tracing"},
	"gateway/bindings/mcsd": {"gateway/bindings", "gateway/config", "gateway/dependencies"},
}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func list(t *testing.T) []pkg {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// testOnly are the module prefixes only packages under test/ may depend on, even
// indirectly: the OpenID provider of test/doubles/openid (docs/architecture.md, "What
// may import what").
var testOnly = []string{"github.com/zitadel/"}

func TestTestOnlyModulesStayUnderTest(t *testing.T) {
	checked := 0
	for _, p := range list(t) {
		if strings.HasPrefix(p.ImportPath, module+"/test/") {
			continue
		}
		checked++
		for _, d := range p.Deps {
			for _, prefix := range testOnly {
				if strings.HasPrefix(d, prefix) {
					t.Errorf("%s depends on %s, which only test/ may", p.ImportPath, d)
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d packages: too few to be the module's", checked)
	}
}

func TestImportsFollowTheArchitecture(t *testing.T) {
	pkgs := list(t)
	seen := map[string]bool{}
	for _, p := range pkgs {
		rel, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok || strings.HasPrefix(rel, "test/") || strings.HasPrefix(rel, "hack/") {
			continue
		}
		may, listed := allowed[rel]
		if !listed {
			t.Errorf("%s is not in docs/architecture.md's import table (and this test's): add it to both", rel)
			continue
		}
		seen[rel] = true
		for _, imp := range p.Imports {
			dep, ours := strings.CutPrefix(imp, module+"/")
			if ours && !slices.Contains(may, dep) {
				t.Errorf("%s imports %s, which docs/architecture.md does not allow", rel, dep)
			}
		}
		if strings.HasPrefix(rel, "gateway/") {
			for _, d := range p.Deps {
				if strings.HasPrefix(d, "k8s.io/") || strings.HasPrefix(d, "sigs.k8s.io/") {
					t.Errorf("%s depends on %s: the gateway must not depend on Kubernetes", rel, d)
					break
				}
			}
		}
	}
	for rel := range allowed {
		if !seen[rel] {
			t.Errorf("the import table names %s, which is no package any more", rel)
		}
	}
}
