//go:build e2e

package demo

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDemoOnTheLocalNode runs `make demo` on the real local node (`make e2e` runs it
// after test/e2e, on the cluster hack/local-cluster.sh started) and checks its summary:
// with the sample's drain delay one rolling restart under load drops no request, with
// drainDelay 0s the same restart drops some, and both Gateways were READY True before
// their restart. The cluster was up before, so the demo must leave it up and remove
// only what it made.
func TestDemoOnTheLocalNode(t *testing.T) {
	root := repoRoot(t)
	kubeconfig := "/var/lib/ferrofed-cluster/kubeconfig"
	if out, err := exec.Command(filepath.Join(root, "hack", "local-cluster.sh"), "status").CombinedOutput(); err != nil {
		t.Fatalf("the local cluster is not up (hack/local-cluster.sh up first): %v\n%s", err, out)
	}
	state := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "hack", "demo.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "DEMO_CLUSTER=local", "DEMO_EXIT_AFTER=0", "DEMO_STATE="+state)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("make demo: %v\n%s", err, out.String())
		}
	case <-time.After(10 * time.Minute):
		_ = cmd.Process.Signal(os.Interrupt)
		if err := <-done; err != nil {
			t.Logf("make demo after the interrupt: %v", err)
		}
		t.Fatalf("make demo on the local node did not stop by itself within 10 minutes:\n%s", out.String())
	}
	got := out.String()
	t.Logf("make demo output:\n%s", got)

	if first := strings.SplitN(got, "\n", 2)[0]; !strings.Contains(first, "on the real local node") {
		t.Errorf("the first line does not say the demo runs on the real node: %q", first)
	}
	t.Run("it prints a curl for every route, each answered through the Service", func(t *testing.T) { checkRoutes(t, got, "node-a") })
	runs := summaries(t, got)
	derived, ok := runs["demo"]
	if !ok {
		t.Fatalf("no summary line for Gateway demo")
	}
	noDelay, ok := runs["demo-nodelay"]
	if !ok {
		t.Fatalf("no summary line for Gateway demo-nodelay")
	}
	t.Run("both Gateways were READY True before their restart", func(t *testing.T) {
		for name, r := range runs {
			if r["ready-before-restart"] != "True" {
				t.Errorf("%s: ready-before-restart=%s", name, r["ready-before-restart"])
			}
		}
		if !regexp.MustCompile(`(?m)^\s+demo\s+True\s+2\s+\d+`).MatchString(got) ||
			!regexp.MustCompile(`(?m)^\s+demo-nodelay\s+True\s+2\s+\d+`).MatchString(got) {
			t.Errorf("`kubectl get fgw` does not show both Gateways READY True with 2 replicas")
		}
	})
	t.Run("with the sample's drain delay no request failed, and every old pod ended within its grace period", func(t *testing.T) {
		if n(t, derived, "requests") < 1000 {
			t.Errorf("only %d requests during the restart", n(t, derived, "requests"))
		}
		if f := n(t, derived, "failures"); f != 0 {
			t.Errorf("%d requests failed with drainDelay %s", f, derived["drainDelay"])
		}
		if p := n(t, derived, "pods-replaced"); p != 2 {
			t.Errorf("%d pods replaced, want 2", p)
		}
		took, err := time.ParseDuration(derived["longest-termination"])
		if err != nil {
			t.Fatal(err)
		}
		grace, err := time.ParseDuration(derived["grace"])
		if err != nil {
			t.Fatal(err)
		}
		delay, err := time.ParseDuration(derived["drainDelay"])
		if err != nil {
			t.Fatal(err)
		}
		// Whole seconds on both sides (the API's): a drain of at least the delay never
		// reads shorter than it.
		if took < delay || took >= grace {
			t.Errorf("longest termination %s, want from the drain delay %s to under the grace period %s", took, delay, grace)
		}
	})
	t.Run("with drainDelay 0s the same restart dropped requests", func(t *testing.T) {
		if noDelay["drainDelay"] != "0s" {
			t.Errorf("drainDelay=%s, want 0s", noDelay["drainDelay"])
		}
		if f := n(t, noDelay, "failures"); f == 0 {
			t.Errorf("no request failed with drainDelay 0s: the demo does not show what the delay buys")
		}
		if p := n(t, noDelay, "pods-replaced"); p != 2 {
			t.Errorf("%d pods replaced, want 2", p)
		}
	})
	t.Run("it removed what it made and left the cluster up", func(t *testing.T) {
		kubectl := filepath.Join(root, "bin", "cluster", "kubectl")
		out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "namespace", "demo", "--ignore-not-found", "-o", "name").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "" {
			t.Errorf("namespace demo left behind: %v %s", err, out)
		}
		if out, err := exec.Command(filepath.Join(root, "hack", "local-cluster.sh"), "status").CombinedOutput(); err != nil {
			t.Errorf("the local cluster is no longer up after the demo: %v\n%s", err, out)
		}
	})
}

// summaries reads the demo's "demo summary:" lines, by gateway, as key=value maps.
func summaries(t *testing.T, out string) map[string]map[string]string {
	t.Helper()
	runs := map[string]map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, "demo summary: ")
		if !ok {
			continue
		}
		kv := map[string]string{}
		for _, f := range strings.Fields(rest) {
			if k, v, ok := strings.Cut(f, "="); ok {
				kv[k] = v
			}
		}
		runs[kv["gateway"]] = kv
	}
	return runs
}

func n(t *testing.T, kv map[string]string, key string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(kv[key], 10, 64)
	if err != nil {
		t.Fatalf("summary %s=%q: %v", key, kv[key], err)
	}
	return v
}
