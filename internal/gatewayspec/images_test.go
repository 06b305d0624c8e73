package gatewayspec

import (
	"strings"
	"testing"
)

func TestImageAllowed(t *testing.T) {
	tests := []struct {
		name     string
		patterns []string
		image    string
		want     bool
	}{
		{"no list allows every image", nil, "evil.example.com/x:latest", true},
		{"a registry path with * allows its repositories and tags", []string{"registry.example.org/ferrofed/*"}, "registry.example.org/ferrofed/ferrofed:v1.2.3", true},
		{"* crosses slashes", []string{"registry.example.org/*"}, "registry.example.org/team/ferrofed@sha256:abc", true},
		{"another registry is refused", []string{"registry.example.org/*"}, "registry.example.org.evil.com/x", false},
		{"a prefix is not a match", []string{"ghcr.io/ferrofed/ferrofed"}, "ghcr.io/ferrofed/ferrofed:v1", false},
		{"a tag pattern", []string{"ghcr.io/ferrofed/ferrofed:v1.*"}, "ghcr.io/ferrofed/ferrofed:v1.4", true},
		{"a tag pattern refuses another major", []string{"ghcr.io/ferrofed/ferrofed:v1.*"}, "ghcr.io/ferrofed/ferrofed:v2.0", false},
		{"regexp characters in a pattern are literal", []string{"a.b/c+d"}, "aXb/c+d", false},
		{"? is one character", []string{"x/y:v?"}, "x/y:v1", true},
		{"any of several", []string{"a/*", "b/*"}, "b/gw", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ImageAllowed(tt.patterns, tt.image); got != tt.want {
				t.Errorf("ImageAllowed(%q, %q) = %v, want %v", tt.patterns, tt.image, got, tt.want)
			}
		})
	}
}

func TestValidateImagePatterns(t *testing.T) {
	if err := ValidateImagePatterns([]string{"a/*", "b"}); err != nil {
		t.Errorf("valid patterns refused: %v", err)
	}
	for _, bad := range []string{"", " ", "a b", "a\nb"} {
		if err := ValidateImagePatterns([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestValidateNamespaces(t *testing.T) {
	if err := ValidateNamespaces([]string{"team-a", "b"}); err != nil {
		t.Errorf("valid namespaces refused: %v", err)
	}
	for _, bad := range []string{"", "Team_A", "a.b", strings.Repeat("a", 64)} {
		err := ValidateNamespaces([]string{bad})
		if err == nil || !strings.Contains(err.Error(), "--watch-namespaces") {
			t.Errorf("%q: %v, want a refusal naming --watch-namespaces", bad, err)
		}
	}
}
