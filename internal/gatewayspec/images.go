package gatewayspec

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ImageAllowed reports whether image matches one of patterns, or patterns is empty
// (every image allowed). A pattern is a glob over the whole image reference: `*`
// matches any run of characters, '/' and ':' included, `?` one character, anything
// else itself: "registry.example.org/ferrofed/*" allows every image and tag under that
// path, "ghcr.io/ferrofed/ferrofed:v1.*" one repository's v1 tags.
func ImageAllowed(patterns []string, image string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if globRegexp(p).MatchString(image) {
			return true
		}
	}
	return false
}

// ImageMessage says why image is not allowed, naming the patterns.
func ImageMessage(patterns []string, image string) string {
	return fmt.Sprintf("spec.image %q matches none of the operator's --allowed-images (%s); nothing is rolled out.",
		image, strings.Join(patterns, ", "))
}

func globRegexp(pattern string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for _, r := range pattern {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// ValidateNamespaces refuses --watch-namespaces entries that cannot name a namespace
// (a DNS-1123 label), naming the flag and the entry.
func ValidateNamespaces(namespaces []string) error {
	for _, ns := range namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("--watch-namespaces: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
	}
	return nil
}

// ValidateImagePatterns refuses patterns that cannot name an image: empty, or with
// whitespace. It is run on --allowed-images before the operator starts.
func ValidateImagePatterns(patterns []string) error {
	for _, p := range patterns {
		if strings.TrimSpace(p) == "" || strings.ContainsAny(p, " \t\r\n") {
			return fmt.Errorf("--allowed-images: %q is not an image pattern (empty, or has whitespace)", p)
		}
	}
	return nil
}
