package proxy

import (
	"fmt"
	"strconv"
	"strings"
)

// maxPathDecodings is how many percent-decodings a path segment is checked through.
// One is net/http's; the others are what a member's server, or a proxy in front of
// it, might add (%252e is %2e after one, "." after two). A segment still encoded after
// this many is refused: no honest FHIR path is encoded five times over.
const maxPathDecodings = 4

// maxShownSegment bounds the segment an error message quotes back.
const maxShownSegment = 64

// CleanPath normalises p, a path the gateway may send on to a member, and checks it:
// the path under {base}/nodes/{id}/fhir of a routed request, and the path under
// {base}/fhir of a federated one, each as net/http decoded it (r.URL.Path). The
// normalised path has no empty segment (runs of "/" are one) and is "" for the FHIR
// base itself.
//
// The path is refused, with the reason, when a segment is a dot segment ("." or "..")
// in any of the ways a server may read one:
//   - as it is: /a/../b;
//   - before a ";" parameter, which Tomcat, Jetty and other servlet containers strip
//     from each segment before they resolve dot segments: /..;/admin, /..;jsessionid=x/,
//     /.;/;
//   - once percent-decoded again, up to maxPathDecodings times: %252e%252e is %2e%2e
//     after the decoding net/http did and ".." after one more, and %2e%2e%3b is "..;";
//   - with "\" as a separator, as some servers treat it: /a\..\b.
//
// A dot segment would walk the member's URL out of its FHIR API (../admin), and a
// member's own path cleaning is not the gateway's to rely on.
func CleanPath(p string) (string, error) {
	if p == "" {
		p = "/"
	}
	if !strings.HasPrefix(p, "/") {
		return "", pathError{reason: "the path must start with /"}
	}
	var b strings.Builder
	b.Grow(len(p))
	for seg := range strings.SplitSeq(p[1:], "/") {
		if seg == "" {
			continue
		}
		if err := CheckSegment(seg); err != nil {
			return "", err
		}
		b.WriteByte('/')
		b.WriteString(seg)
	}
	if strings.HasSuffix(p, "/") && b.Len() > 0 {
		b.WriteByte('/') // a trailing slash is the client's to send
	}
	return b.String(), nil
}

// pathError is a refused member path; its text is the OperationOutcome's diagnostics.
type pathError struct{ reason string }

func (e pathError) Error() string { return e.reason }

// CheckSegment refuses a segment that is, or decodes to, a dot segment.
func CheckSegment(seg string) error {
	s := seg
	for decodings := 0; ; decodings++ {
		for piece := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == '/' || r == '\\' }) {
			name, _, param := strings.Cut(piece, ";")
			if name != "." && name != ".." {
				continue
			}
			var how []string
			if decodings > 0 {
				how = append(how, fmt.Sprintf("once percent-decoded %s", times(decodings)))
			}
			if param {
				how = append(how, `behind a ";" parameter`)
			}
			if len(how) == 0 && piece == seg {
				return pathError{reason: fmt.Sprintf("the path must not contain a %q segment", name)}
			}
			if piece != s || len(how) == 0 {
				how = append(how, `with "\" as a separator`)
			}
			return pathError{reason: fmt.Sprintf("the path segment %s is a %q segment %s: a member's server may resolve it as one",
				quoteSegment(seg), name, strings.Join(how, ", "))}
		}
		next := percentDecode(s)
		if next == s {
			return nil
		}
		if decodings == maxPathDecodings {
			return pathError{reason: fmt.Sprintf("the path segment %s is percent-encoded more than %d times over", quoteSegment(seg), maxPathDecodings)}
		}
		s = next
	}
}

func times(n int) string {
	if n == 1 {
		return "once more"
	}
	return strconv.Itoa(n) + " more times"
}

func quoteSegment(seg string) string {
	if len(seg) > maxShownSegment {
		return strconv.Quote(seg[:maxShownSegment]) + "…"
	}
	return strconv.Quote(seg)
}

// percentDecode decodes every valid %XX of s and leaves the rest as it is, the way a
// lenient server would: "%2e%2e%zz" is "..%zz", where url.PathUnescape would refuse
// the whole and hide the dots.
func percentDecode(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			out = append(out, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		out = append(out, s[i])
	}
	return string(out)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
