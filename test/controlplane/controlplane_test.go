package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMissingNamesTheBinaryAndItsBuilder(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", dir)
	if why := Missing(false); !strings.Contains(why, filepath.Join(dir, "kube-apiserver")) || !strings.Contains(why, "hack/controlplane.sh") {
		t.Fatalf("Missing() = %q, want kube-apiserver and hack/controlplane.sh named", why)
	}
	for _, b := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if why := Missing(false); why != "" {
		t.Fatalf("Missing() = %q with every binary there", why)
	}
	if err := os.Chmod(filepath.Join(dir, "etcd"), 0o644); err != nil {
		t.Fatal(err)
	}
	if why := Missing(false); !strings.Contains(why, "etcd") {
		t.Fatalf("Missing() = %q, want a non-executable etcd named", why)
	}
}

func TestCIIsOnlyTrueForCIEqualsTrue(t *testing.T) {
	for v, want := range map[string]bool{"true": true, "": false, "1": false, "false": false} {
		t.Setenv("CI", v)
		if CI() != want {
			t.Errorf("CI=%q: CI() = %v, want %v", v, CI(), want)
		}
	}
}
