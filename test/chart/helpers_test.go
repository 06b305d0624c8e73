// Package chart tests charts/ferrofed: its rendered output against golden files, its
// values schema, `helm lint`, and a real install into a local control plane with the
// operator running against it.
//
// The tools come from the repository's bin/ folder: bin/helm (hack/tools.sh) and
// bin/k8s (hack/controlplane.sh); `make test` builds both first. A missing tool fails
// the test under CI=true and skips it elsewhere, naming the command that builds it
// (test/controlplane).
package chart

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/test/controlplane"
)

// repoRoot is the repository root, found from this file's location.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test file")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

func chartDir(t testing.TB) string { return filepath.Join(repoRoot(t), "charts", "ferrofed") }

// helmBin is bin/helm; without it the test fails under CI=true and skips elsewhere.
func helmBin(t testing.TB) string {
	t.Helper()
	return controlplane.RequireHelm(t)
}

// k8sAssets is the folder of kube-apiserver, etcd and kubectl, for envtest.
func k8sAssets(t testing.TB) string {
	t.Helper()
	return controlplane.Require(t, true)
}

// helm runs bin/helm with args and extra environment; it returns stdout, stderr and
// the error. Helm's own folders are kept in a temporary folder, away from $HOME.
func helm(t testing.TB, env []string, args ...string) (string, string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmBin(t), args...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// mustHelm runs helm and fails the test when it fails.
func mustHelm(t testing.TB, env []string, args ...string) string {
	t.Helper()
	out, errOut, err := helm(t, env, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s\n%s", strings.Join(args, " "), err, errOut, out)
	}
	return out
}
