// Package demo runs `make demo` (hack/demo.sh) non-interactively, as a smoke test: with
// DEMO_EXIT_AFTER it starts everything, answers every route once, drains the gateway
// and stops what it started. It needs bin/k8s and bin/helm like the chart tests (the
// script builds both when missing; `make test` builds them first). This file runs the
// envtest demo (`make test`); local_test.go, tag e2e, the real-node one (`make e2e`).
package demo

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
	"github.com/ferrofed/ferrofed/test/controlplane"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test file")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

func TestDemoRunsEndToEndAndStopsEverything(t *testing.T) {
	root := repoRoot(t)
	controlplane.Require(t, true)
	state := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "hack", "demo.sh"))
	cmd.Dir = root
	// The envtest demo, whatever this machine can run: as root here `make demo` would pick
	// the real node, which test/demo's e2e half (local_test.go, `make e2e`) runs.
	cmd.Env = append(os.Environ(), "DEMO_CLUSTER=envtest", "DEMO_EXIT_AFTER=1", "DEMO_STATE="+state)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("make demo: %v\n%s", err, out.String())
		}
	case <-time.After(8 * time.Minute):
		_ = cmd.Process.Signal(os.Interrupt)
		if err := <-done; err != nil {
			t.Logf("make demo after the interrupt: %v", err)
		}
		t.Fatalf("make demo did not stop by itself within 8 minutes:\n%s", out.String())
	}
	got := out.String()
	t.Logf("make demo output:\n%s", got)

	t.Run("it prints the grace period the operator derived from the sample", func(t *testing.T) {
		want := sampleGracePeriod(t, root)
		if !strings.Contains(got, fmt.Sprintf("terminationGracePeriodSeconds: %d\n", want)) {
			t.Errorf("output lacks terminationGracePeriodSeconds: %d", want)
		}
		for _, p := range []string{"startupProbe:", "readinessProbe:", "livenessProbe:"} {
			if !strings.Contains(got, p) {
				t.Errorf("output lacks %s", p)
			}
		}
	})
	t.Run("it prints a curl for every route, each answered", func(t *testing.T) { checkRoutes(t, got, "member-a") })
	t.Run("it shows the four drain steps in order", func(t *testing.T) {
		at := 0
		for _, step := range []string{"ShutdownInitiated", "DrainDelayElapsed", "ListenerClosed", "InFlightDrained", "BindingsStopped", "Drained"} {
			i := strings.Index(got[at:], step)
			if i < 0 {
				t.Fatalf("drain step %s missing or out of order", step)
			}
			at += i
		}
		if !strings.Contains(got, "readiness:  503") {
			t.Error("readiness did not answer 503 during the drain delay")
		}
	})
	t.Run("it leaves no process behind", func(t *testing.T) {
		port := regexp.MustCompile(`control plane up at https://127\.0\.0\.1:(\d+)/`).FindStringSubmatch(got)
		if port == nil {
			t.Fatal("the output does not name the control plane's address")
		}
		for _, left := range processesWith(state, "--secure-port="+port[1]) {
			t.Errorf("left running: %s", left)
		}
	})
}

// checkRoutes finds in the demo's output a curl for each route, with the answer below
// it: the data plane's routes carry the demo client's token (auth.data_plane =
// "required", the default) and answer 200, the same search without a token 401, the
// dependency report with the operator's token 200. member is the member the routed
// request names.
func checkRoutes(t *testing.T, got, member string) {
	t.Helper()
	for _, c := range []struct{ route, token, status string }{
		{"/health'", "", "200"},
		{"/health/readiness'", "", "200"},
		{"/fhir/Patient?family=Smith'", "client-token", "200"},
		{"/nodes/" + member + "/fhir/Patient'", "client-token", "200"},
		{"/fhir/Patient?family=Smith'", "", "401"},
		{"/operator/dependencies'", "token", "200"},
	} {
		header := ""
		if c.token != "" {
			header = `-H "Authorization: Bearer \$\(cat [^)\n]*/` + c.token + `\)" `
		}
		re := regexp.MustCompile(`curl -s ` + header + `'[^'\n]*` + regexp.QuoteMeta(c.route) + `\n\s+(\d{3}) `)
		m := re.FindStringSubmatch(got)
		if m == nil {
			t.Errorf("no curl with an answer for %s (bearer token: %q)", c.route, c.token)
			continue
		}
		if m[1] != c.status {
			t.Errorf("%s (bearer token: %q) answered %s, want %s", c.route, c.token, m[1], c.status)
		}
	}
}

// sampleGracePeriod is the grace period the operator derives for the sample the demo
// applies, computed by gateway/lifecycle through the API types.
func sampleGracePeriod(t *testing.T, root string) int64 {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "config", "samples", "*.yaml"))
	if s := os.Getenv("DEMO_SAMPLE"); s != "" { // the demo applies it instead
		files = []string{s}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(data, []byte("kind: Gateway")) {
			continue
		}
		var gw ferrofedv1alpha1.Gateway
		if err := yaml.Unmarshal(data, &gw); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		return gatewayspec.Plan(&gw.Spec).GracePeriodSeconds
	}
	t.Fatal("config/samples holds no Gateway")
	return 0
}

// processesWith lists the running processes whose command line holds any of marks.
func processesWith(marks ...string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		raw, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue
		}
		line := strings.ReplaceAll(string(raw), "\x00", " ")
		for _, m := range marks {
			if strings.Contains(line, m) {
				found = append(found, filepath.Base(d)+": "+line)
				break
			}
		}
	}
	return found
}
