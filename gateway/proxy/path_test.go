package proxy

import (
	"strings"
	"testing"
)

func TestMemberPathRefusesEveryDotSegmentHowsoeverHidden(t *testing.T) {
	refused := map[string]string{
		"/..":                    `".." segment`,
		"/a/../b":                `".." segment`,
		"/./a":                   `"." segment`,
		"/a/..":                  `".." segment`,
		"/..;/..;/admin":         `behind a ";" parameter`,
		"/..;jsessionid=x/admin": `behind a ";" parameter`,
		"/.;/admin":              `"." segment behind a ";" parameter`,
		"/Patient/..;":           `behind a ";" parameter`,
		// What net/http left of %25 2e: one more decoding makes it a dot.
		"/%2e%2e/admin":     "once percent-decoded once more",
		"/%2E%2e%3b/admin":  `once percent-decoded once more, behind a ";" parameter`,
		"/%252e%252e/admin": "once percent-decoded 2 more times",
		"/.%2e;x/admin":     "once percent-decoded once more",
		"/a%2f..%2fb":       "once percent-decoded once more",
		"/a%5c..%5cb":       "once percent-decoded once more",
		"/%2e%2e;%zz/x":     `once percent-decoded once more, behind a ";" parameter`,
		"/a\\..\\b":         `with "\" as a separator`,
		// Past maxPathDecodings, whatever it hides.
		"/%2525252525252e": "percent-encoded more than 4 times over",
		"/no-slash":        "",
	}
	for in, want := range refused {
		got, err := CleanPath(in)
		if in == "/no-slash" {
			in, want = "no-slash", "must start with /"
			got, err = CleanPath(in)
		}
		if err == nil {
			t.Errorf("memberPath(%q) accepted: %q", in, got)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("memberPath(%q): %q, want it to say %q", in, err, want)
		}
	}
	accepted := map[string]string{
		"/Patient/1": "/Patient/1", "/": "", "": "", "/a..b/c": "/a..b/c",
		"/Patient//1": "/Patient/1", "//Patient/": "/Patient/", "/Patient;v=1/1": "/Patient;v=1/1",
		"/...": "/...", "/.a/b.": "/.a/b.", "/%2e%2ex": "/%2e%2ex", "/%25": "/%25",
		"/Patient/_history;x": "/Patient/_history;x", "/;../x": "/;../x",
	}
	for in, want := range accepted {
		if got, err := CleanPath(in); err != nil || got != want {
			t.Errorf("memberPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
