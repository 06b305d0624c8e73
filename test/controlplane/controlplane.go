// Package controlplane finds the tools the envtest, chart and demo tests run: the local
// control plane (kube-apiserver, etcd and kubectl in bin/k8s, built by
// hack/controlplane.sh) and helm (bin/helm, hack/tools.sh). `make test` builds both
// first and points KUBEBUILDER_ASSETS at bin/k8s.
//
// Without them a test cannot prove anything, so it never passes quietly: under CI=true
// it fails, naming what is missing and what builds it; elsewhere (a developer's `go test
// ./...`) it skips, test by test, with the same words, so that `go test -v` shows it.
package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Root is the repository root, found from this file's location.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Assets is the folder of kube-apiserver, etcd and kubectl: KUBEBUILDER_ASSETS when set,
// else bin/k8s. Missing says what is absent from it.
func Assets() string {
	if a := os.Getenv("KUBEBUILDER_ASSETS"); a != "" {
		return a
	}
	return filepath.Join(Root(), "bin", "k8s")
}

// Helm is bin/helm.
func Helm() string { return filepath.Join(Root(), "bin", "helm") }

// MissingHelm is "" when bin/helm is there, else a sentence saying what builds it.
func MissingHelm() string {
	if !executable(Helm()) {
		return fmt.Sprintf("no helm: %s is missing (build it with hack/tools.sh; make test does this first)", Helm())
	}
	return ""
}

// Missing is "" when the control plane (and, with helm, bin/helm) is there, else a
// sentence naming the first missing binary and the command that builds it.
func Missing(helm bool) string {
	for _, b := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if p := filepath.Join(Assets(), b); !executable(p) {
			return fmt.Sprintf("no control plane: %s is missing (build it with hack/controlplane.sh; make test does this first)", p)
		}
	}
	if helm {
		return MissingHelm()
	}
	return ""
}

func executable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// CI reports whether the tests run in CI (CI=true), where a missing tool fails.
func CI() bool { return os.Getenv("CI") == "true" }

// RequireHelm fails (under CI=true) or skips the test when bin/helm is missing; else
// it returns its path.
func RequireHelm(t testing.TB) string {
	t.Helper()
	SkipOrFail(t, MissingHelm())
	return Helm()
}

// SkipOrFail skips t, saying why, when why is not empty; under CI=true it fails it
// instead: a tool CI installs is never silently missing there.
func SkipOrFail(t testing.TB, why string) {
	t.Helper()
	if why == "" {
		return
	}
	if CI() {
		t.Fatal(why + "; CI=true, so this fails instead of skipping")
	}
	t.Skip(why)
}

// Require fails (under CI=true) or skips the test when the control plane, and with
// helm bin/helm, is missing; else it sets KUBEBUILDER_ASSETS for envtest and returns the
// control plane's folder.
func Require(t testing.TB, helm bool) string {
	t.Helper()
	SkipOrFail(t, Missing(helm))
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		os.Setenv("KUBEBUILDER_ASSETS", Assets())
	}
	return Assets()
}
