// Package checks tests the release checks in hack/checks: each script passes on the
// repository's own examples and fails, naming the file and the values, on a broken copy.
package checks

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// repoRoot is the repository root, found from this file's location.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test file")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// run runs a check script with args and returns its exit code and combined output.
func run(t *testing.T, script string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot(t), "hack", "checks", script), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String()
	}
	t.Fatalf("run %s: %v\n%s", script, err, out.String())
	return 0, ""
}

// brokenCopy copies the example folder into a temporary folder and replaces old with
// new in file (old must occur exactly once, so that a changed example fails loudly
// here rather than silently testing nothing).
func brokenCopy(t *testing.T, example, file, old, new string) string {
	t.Helper()
	src := filepath.Join(repoRoot(t), "examples", example)
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == file {
			if n := strings.Count(string(data), old); n != 1 {
				t.Fatalf("examples/%s/%s holds %q %d times, want once: update this test", example, file, old, n)
			}
			data = []byte(strings.Replace(string(data), old, new, 1))
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestChecksPassOnTheExamples(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   []string
	}{
		{"kubernetes-example.sh", []string{
			`ok: examples/kubernetes/deployment.yaml: Deployment "ferrofed"`,
			`ok: examples/kubernetes/gateway.yaml: Gateway "example"`,
		}},
		{"release-compose.sh", []string{
			`ok: examples/compose/compose.yaml: service "gateway": stop_grace_period 20s outlasts`,
		}},
	} {
		t.Run(tc.script+" passes with its default paths", func(t *testing.T) {
			code, out := run(t, tc.script)
			if code != 0 {
				t.Fatalf("exit %d, want 0:\n%s", code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestChecksFailOnBrokenExamples(t *testing.T) {
	for _, tc := range []struct {
		name, script, example, file, old, new string
		want                                  []string
	}{
		{
			name: "a Deployment whose grace period equals the drain", script: "kubernetes-example.sh",
			example: "kubernetes", file: "deployment.yaml",
			old: "terminationGracePeriodSeconds: 50", new: "terminationGracePeriodSeconds: 45",
			want: []string{"FAIL:", "deployment.yaml", `Deployment "ferrofed"`, "terminationGracePeriodSeconds 45s does not outlast",
				"server.drain_delay_ms 10s + server.shutdown_timeout_ms 30s + server.bindings_drain_timeout_ms 5s = 45s"},
		},
		{
			name: "a Deployment whose ferrofed.toml leaves out the drain delay", script: "kubernetes-example.sh",
			example: "kubernetes", file: "deployment.yaml",
			old: "    drain_delay_ms = 10000\n", new: "",
			want: []string{"FAIL:", "deployment.yaml", `ConfigMap "ferrofed-config"`, "does not set server.drain_delay_ms"},
		},
		{
			name: "a Deployment without terminationGracePeriodSeconds", script: "kubernetes-example.sh",
			example: "kubernetes", file: "deployment.yaml",
			old: "      terminationGracePeriodSeconds: 50\n", new: "",
			want: []string{"FAIL:", "deployment.yaml", "terminationGracePeriodSeconds is not set"},
		},
		{
			name: "a Gateway whose drain outgrows the derived grace period", script: "kubernetes-example.sh",
			example: "kubernetes", file: "gateway.yaml",
			old: "terminationHeadroom: 5s", new: "terminationHeadroom: 0s",
			want: []string{"FAIL:", "gateway.yaml", `Gateway "example"`, "45s does not outlast",
				"spec.lifecycle.drainDelay 10s + spec.lifecycle.shutdownTimeout 30s + spec.lifecycle.bindingsDrainTimeout 5s = 45s"},
		},
		{
			name: "a Gateway with an explicit grace period that is too short", script: "kubernetes-example.sh",
			example: "kubernetes", file: "gateway.yaml",
			old: "    terminationHeadroom: 5s\n", new: "    terminationGracePeriodSeconds: 40\n",
			want: []string{"FAIL:", "gateway.yaml", "spec.lifecycle.terminationGracePeriodSeconds 40s does not outlast", "= 45s"},
		},
		{
			name: "a Gateway that leaves out the bindings budget", script: "kubernetes-example.sh",
			example: "kubernetes", file: "gateway.yaml",
			old: "    bindingsDrainTimeout: 5s\n", new: "",
			want: []string{"FAIL:", "gateway.yaml", "does not set spec.lifecycle.bindingsDrainTimeout"},
		},
		{
			name: "the quickstart whose stop_grace_period is shorter than the drain", script: "release-compose.sh",
			example: "compose", file: "compose.yaml",
			old: "stop_grace_period: 20s", new: "stop_grace_period: 10s",
			want: []string{"FAIL:", "compose.yaml", `service "gateway"`, "stop_grace_period 10s does not outlast",
				"server.drain_delay_ms 0s + server.shutdown_timeout_ms 10s + server.bindings_drain_timeout_ms 5s = 15s", "ferrofed.toml"},
		},
		{
			name: "the quickstart whose ferrofed.toml leaves out the shutdown timeout", script: "release-compose.sh",
			example: "compose", file: "ferrofed.toml",
			old: "shutdown_timeout_ms = 10000\n", new: "",
			want: []string{"FAIL:", "ferrofed.toml", "does not set server.shutdown_timeout_ms"},
		},
		{
			name: "the quickstart without stop_grace_period", script: "release-compose.sh",
			example: "compose", file: "compose.yaml",
			old: "    stop_grace_period: 20s\n", new: "",
			want: []string{"FAIL:", "compose.yaml", "stop_grace_period is not set"},
		},
	} {
		t.Run(tc.script+" fails on "+tc.name, func(t *testing.T) {
			dir := brokenCopy(t, tc.example, tc.file, tc.old, tc.new)
			code, out := run(t, tc.script, dir)
			if code != 1 {
				t.Fatalf("exit %d, want 1:\n%s", code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestChecksFailWhenNothingIsFound(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "other.yaml"), []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, script := range []string{"kubernetes-example.sh", "release-compose.sh"} {
		t.Run(script+" fails on a folder with no gateway", func(t *testing.T) {
			code, out := run(t, script, dir)
			if code != 1 || !strings.Contains(out, "FAIL:") {
				t.Fatalf("exit %d, want 1 with FAIL:\n%s", code, out)
			}
		})
	}
}

// TestExampleConfigurationsLoad holds the examples' ferrofed.toml files to what
// `ferrofed config check` accepts, so that a check that passes is about a gateway that
// would start.
func TestExampleConfigurationsLoad(t *testing.T) {
	root := repoRoot(t)
	t.Run("the quickstart's ferrofed.toml loads", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(root, "examples", "compose", "ferrofed.toml"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := config.Parse(data, "examples/compose/ferrofed.toml", config.Options{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the Deployment example's ConfigMap loads", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(root, "examples", "kubernetes", "deployment.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		found := false
		for {
			var doc struct {
				Kind string            `yaml:"kind"`
				Data map[string]string `yaml:"data"`
			}
			if err := dec.Decode(&doc); err != nil {
				break
			}
			if doc.Kind == "ConfigMap" {
				found = true
				if _, err := config.Parse([]byte(doc.Data["ferrofed.toml"]), "deployment.yaml ConfigMap", config.Options{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !found {
			t.Fatal("examples/kubernetes/deployment.yaml has no ConfigMap")
		}
	})
}

// TestTheImageAndTheQuickstartUseTheHealthcheck holds the Dockerfile and the compose
// quickstart to the README's promise: both ask `ferrofed healthcheck` with the configuration
// serve reads, and the image builds packages that exist.
func TestTheImageAndTheQuickstartUseTheHealthcheck(t *testing.T) {
	root := repoRoot(t)
	const check = `"ferrofed", "healthcheck", "--config", "/etc/ferrofed/ferrofed.toml"`
	t.Run("the Dockerfile's HEALTHCHECK runs ferrofed healthcheck", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(root, "examples", "Dockerfile"))
		if err != nil {
			t.Fatal(err)
		}
		s := string(data)
		if !strings.Contains(s, "HEALTHCHECK") || !strings.Contains(s, `CMD [`+check+`]`) {
			t.Fatalf("examples/Dockerfile has no HEALTHCHECK CMD [%s]", check)
		}
		if !strings.Contains(s, `CMD ["serve", "--config", "/etc/ferrofed/ferrofed.toml"]`) {
			t.Fatal("examples/Dockerfile does not serve the file its HEALTHCHECK reads")
		}
		for _, pkg := range []string{".", "./test/doubles/members/fhirmember"} {
			if !strings.Contains(s, "-o /out/") || !strings.Contains(s, " "+pkg) {
				t.Errorf("examples/Dockerfile does not build %s", pkg)
			}
			cmd := exec.Command("go", "list", pkg)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("the Dockerfile builds %s, which go list refuses: %v\n%s", pkg, err, out)
			}
		}
	})
	t.Run("the quickstart's gateway service runs ferrofed healthcheck", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(root, "examples", "compose", "compose.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Services map[string]struct {
				Healthcheck struct {
					Test []string `yaml:"test"`
				} `yaml:"healthcheck"`
			} `yaml:"services"`
		}
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(doc.Services["gateway"].Healthcheck.Test, " ")
		if got != "CMD ferrofed healthcheck --config /etc/ferrofed/ferrofed.toml" {
			t.Fatalf("gateway healthcheck test = %q", got)
		}
	})
}
