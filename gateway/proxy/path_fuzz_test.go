package proxy

import (
	"strings"
	"testing"
)

// FuzzMemberPath checks the routed-path normaliser (seeds in
// testdata/fuzz/FuzzMemberPath): it never panics; a path it accepts, percent-decoded
// until nothing changes and split at "/" and "\", has no dot segment, bare or behind a
// ";" parameter; and its normal form is accepted again, unchanged.
func FuzzMemberPath(f *testing.F) {
	for _, p := range []string{"/Patient/1", "/..;/..;/admin", "/%2e%2e%3b/x", "/%252e%252e/x", "/a\\..\\b", "//a//b/", ";", ""} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := CleanPath(p)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("memberPath(%q) refused without a reason", p)
			}
			return
		}
		if seg, ok := hiddenDotSegment(got); ok {
			t.Fatalf("memberPath(%q) accepted %q, which holds the dot segment %q", p, got, seg)
		}
		again, err := CleanPath(got)
		if err != nil || again != got {
			t.Fatalf("memberPath(%q) = %q, but CleanPath(%q) = %q, %v", p, got, got, again, err)
		}
		if got != "" && (!strings.HasPrefix(got, "/") || strings.Contains(got, "//")) {
			t.Fatalf("memberPath(%q) = %q is not a normal form", p, got)
		}
	})
}

// hiddenDotSegment is the oracle, written apart from CleanPath: it decodes the whole
// path again and again (as lenient a decoder as a member might run) and looks at every
// segment of every decoding.
func hiddenDotSegment(p string) (string, bool) {
	for range 64 {
		for _, seg := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
			if i := strings.IndexByte(seg, ';'); i >= 0 {
				seg = seg[:i]
			}
			if seg == "." || seg == ".." {
				return seg, true
			}
		}
		next := lenientUnescape(p)
		if next == p {
			return "", false
		}
		p = next
	}
	return p, true // still decoding after 64 rounds: CleanPath must not accept that
}

func lenientUnescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, ok := hexByte(s[i+1 : i+3]); ok {
				b.WriteByte(v)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func hexByte(h string) (byte, bool) {
	var v byte
	for _, c := range []byte(h) {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= c - '0'
		case c >= 'a' && c <= 'f':
			v |= c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v |= c - 'A' + 10
		default:
			return 0, false
		}
	}
	return v, true
}
