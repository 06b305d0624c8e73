// Package scrub is the one rule for text a member or a binding wrote that the gateway
// passes on to a client: an OperationOutcome's diagnostics, details and expressions
// (a federated page's outcome entries, a routed error, the gateway's own issue that
// quotes a member) and a binding step's failure (its answer to the client and its log
// line). It is pure and imports nothing of ferrofed, so that the federation and every
// binding use the same rule (docs/architecture.md, "What may import what").
//
// Text keeps its words, the FHIR issue codes and FHIRPath expressions (Patient.name)
// included; what could locate or unlock a system behind the gateway is replaced:
//
//   - every absolute URL (scheme://…, its userinfo, path and query with it): [url]
//   - userinfo before a host (user:password@host, user@host): [host]
//   - IPv4 and IPv6 addresses, bracketed or bare, with or without a port or zone: [host]
//   - host names with a port (backend:8443, fhir.internal:443), localhost, and dotted
//     names ending in a common public or internal suffix (.com, .org, .internal,
//     .local, .svc, .lan, .corp, a country code, …): [host]
//   - the value of an Authorization (or Proxy-Authorization) header, a bearer token,
//     a JSON Web Token: [redacted]
//   - the value of a credential-like parameter (a name containing token, password,
//     passwd, pwd, secret, apikey, api_key, api-key, credential or sessionid, before
//     = or :): name=[redacted]
//
// Names are matched in any case. Text is cut to MaxBytes first (at a character
// boundary) and control characters other than tab and newline are dropped. Text
// returns what it is given when it is already scrubbed: Text(Text(s)) == Text(s).
package scrub

import (
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxBytes is the most of one text that is kept.
const MaxBytes = 2048

// The replacements.
const (
	URL      = "[url]"
	Host     = "[host]"
	Redacted = "[redacted]"
)

var (
	authorization = regexp.MustCompile(`(?i)\b(?:proxy-)?authorization\s*[:=]\s*("[^"]*"|'[^']*'|(?:[a-z][a-z0-9_-]*\s+)?[^\s"',;&<>()\[\]{}]+)`)
	bearer        = regexp.MustCompile(`(?i)\bbearer\s+([a-z0-9._~+/=-]{8,})`)
	jwt           = regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`)
	absoluteURL   = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s"'<>` + "`" + `]*`)
	credential    = regexp.MustCompile(`(?i)[a-z0-9_.-]*(?:token|password|passwd|pwd|secret|apikey|api_key|api-key|credential|sessionid|session_id)[a-z0-9_.-]*(\s*[:=]\s*)("[^"]*"|'[^']*'|[^\s&;,"'<>()\[\]{}]+)`)
	userinfo      = regexp.MustCompile(`[^\s@/:"'<>()\[\]{},;]+(?::[^\s@/"'<>]*)?@[^\s/"'<>?#,;()]+`)
	bracketedIPv6 = regexp.MustCompile(`\[([0-9A-Fa-f:.]+(?:%[0-9A-Za-z_.-]+)?)\](?::\d{1,5})?`)
	bareIPv6      = regexp.MustCompile(`[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(?:%[0-9A-Za-z_.-]+)?`)
	ipv4          = regexp.MustCompile(`\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?`)
	hostPort      = regexp.MustCompile(`(?i)[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*\.?:\d{1,5}`)
	dottedName    = regexp.MustCompile(`(?i)[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+`)
	localhost     = regexp.MustCompile(`(?i)localhost`)
)

// suffixes are the last labels that make a dotted name a host name without a port: a
// FHIRPath (Patient.name.given) ends in none of them.
var suffixes = map[string]bool{
	"com": true, "net": true, "org": true, "edu": true, "gov": true, "mil": true, "int": true, "info": true, "biz": true,
	"io": true, "ai": true, "app": true, "dev": true, "cloud": true, "health": true, "care": true, "hospital": true,
	"local": true, "localdomain": true, "localhost": true, "internal": true, "intranet": true, "intra": true, "lan": true,
	"corp": true, "home": true, "private": true, "svc": true, "cluster": true, "example": true, "test": true,
	"invalid": true, "arpa": true,
	"nl": true, "de": true, "uk": true, "fr": true, "be": true, "ch": true, "eu": true, "us": true, "ca": true, "au": true,
	"nz": true, "se": true, "dk": true, "fi": true, "es": true, "pt": true, "ie": true, "pl": true, "at": true, "lu": true,
	"cz": true, "jp": true,
}

// Text is s with the rule of the package applied.
func Text(s string) string {
	if len(s) > MaxBytes {
		cut := MaxBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\t' && r != '\n') || r == 0x7f {
			return -1
		}
		return r
	}, s)

	// The passes that may span words (a header's scheme and value, a quoted value)
	// run around each of their names; the others on each word that holds what they
	// look for. Regular expressions over the whole text cost tens of nanoseconds a
	// byte each, most text is words, and a member chooses the text.
	s = eachWord(s, urls)
	s = around(s, []string{"authorization", "bearer"}, func(w string) string {
		return replaceGroup(replaceGroup(w, authorization, 1, Redacted), bearer, 1, Redacted)
	})
	s = around(s, credentialNames, func(w string) string {
		return replaceGroup(w, credential, 2, Redacted)
	})
	return eachWord(s, word)
}

// eachWord is s with f applied to each of its words (runs without white space).
func eachWord(s string, f func(string) string) string {
	var b strings.Builder
	b.Grow(len(s))
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && !isSpace(s[i]) {
			continue
		}
		b.WriteString(f(s[start:i]))
		if i < len(s) {
			b.WriteByte(s[i])
		}
		start = i + 1
	}
	return b.String()
}

// urls is one word with its absolute URLs replaced.
func urls(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return replaceFunc(s, absoluteURL, func(m string, _, _ int) (string, bool) {
		// Punctuation that ends a sentence stays outside.
		trimmed := strings.TrimRight(m, ".,;:!?)]}")
		return URL + m[len(trimmed):], true
	})
}

// word is one word of a text (no white space in it) with the rule's one-word passes
// applied, each only when what it looks for can be there.
func word(s string) string {
	if !strings.ContainsAny(s, ":.@") && !strings.Contains(s, "eyJ") && !containsFold(s, "localhost") {
		return s
	}
	if strings.Contains(s, "eyJ") {
		s = jwt.ReplaceAllLiteralString(s, Redacted)
	}
	if strings.Contains(s, "@") {
		s = replaceFunc(s, userinfo, func(m string, start, _ int) (string, bool) {
			return Host, start == 0 || !isWord(s[start-1])
		})
	}
	if strings.Contains(s, "[") {
		s = replaceFunc(s, bracketedIPv6, func(m string, _, _ int) (string, bool) {
			inner := m[1:strings.IndexByte(m, ']')]
			return Host, isIPv6(inner)
		})
	}
	if strings.Count(s, ":") >= 2 {
		s = replaceFunc(s, bareIPv6, func(m string, start, end int) (string, bool) {
			if start > 0 && (isWord(s[start-1]) || s[start-1] == ':' || s[start-1] == '.') {
				return "", false
			}
			if end < len(s) && isWord(s[end]) {
				return "", false
			}
			trimmed := strings.TrimRight(m, ".:")
			return Host + m[len(trimmed):], isIPv6(trimmed)
		})
	}
	if digitDotDigit(s) {
		s = replaceFunc(s, ipv4, func(m string, start, end int) (string, bool) {
			if !boundedBefore(s, start) || !boundedAfter(s, end) || strings.HasSuffix(strings.ToLower(s[:start]), "oid:") {
				return "", false // an OID (urn:oid:1.2.3.4) is no address
			}
			addr, port, _ := strings.Cut(m, ":")
			for o := range strings.SplitSeq(addr, ".") {
				if n, _ := strconv.Atoi(o); n > 255 {
					return "", false
				}
			}
			return Host, validPort(port)
		})
	}
	if colonDigit(s) {
		s = replaceFunc(s, hostPort, func(m string, start, end int) (string, bool) {
			if !boundedBefore(s, start) || !boundedAfter(s, end) || (start > 0 && s[start-1] == ':') || (end < len(s) && s[end] == ':') {
				return "", false
			}
			name, port, _ := strings.Cut(m, ":")
			return Host, validPort(port) && strings.IndexFunc(name, isLetter) >= 0
		})
	}
	if strings.Contains(s, ".") {
		s = replaceFunc(s, dottedName, func(m string, start, end int) (string, bool) {
			if !boundedBefore(s, start) || !boundedAfter(s, end) || (end < len(s) && s[end] == '(') {
				return "", false
			}
			i := strings.LastIndexByte(m, '.')
			return Host, suffixes[strings.ToLower(m[i+1:])]
		})
	}
	if containsFold(s, "localhost") {
		s = replaceFunc(s, localhost, func(_ string, start, end int) (string, bool) {
			return Host, boundedBefore(s, start) && boundedAfter(s, end)
		})
	}
	return s
}

// around applies f to the parts of s around each occurrence of one of names (in any
// case): from the start of the word it is in to the end of the word 256 bytes on,
// parts that overlap joined.
func around(s string, names []string, f func(string) string) string {
	lower := asciiLower(s)
	var hits []int
	for _, n := range names {
		for i := 0; ; {
			j := strings.Index(lower[i:], n)
			if j < 0 {
				break
			}
			hits = append(hits, i+j)
			i += j + len(n)
		}
	}
	if hits == nil {
		return s
	}
	slices.Sort(hits)
	var b strings.Builder
	last := 0 // s[:last] is written
	for k := 0; k < len(hits); {
		from := hits[k]
		for from > last && !isSpace(s[from-1]) {
			from--
		}
		to := wordEnd(s, hits[k]+256)
		for k++; k < len(hits) && hits[k] < to; k++ {
			to = wordEnd(s, hits[k]+256)
		}
		b.WriteString(s[last:from])
		b.WriteString(f(s[from:to]))
		last = to
	}
	b.WriteString(s[last:])
	return b.String()
}

// wordEnd is the end of the word at i (len(s) past it).
func wordEnd(s string, i int) int {
	for i < len(s) && !isSpace(s[i]) {
		i++
	}
	return min(i, len(s))
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' }

// asciiLower is s with A-Z in lower case, every byte where it was.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func containsFold(s, sub string) bool { return strings.Contains(asciiLower(s), sub) }

// credentialNames are what credential's names contain, in lower case.
var credentialNames = []string{"token", "passw", "pwd", "secret", "api", "credential", "session"}

// digitDotDigit reports whether s has a digit, a dot and a digit in a row.
func digitDotDigit(s string) bool {
	for i := 1; i+1 < len(s); i++ {
		if s[i] == '.' && isDigit(s[i-1]) && isDigit(s[i+1]) {
			return true
		}
	}
	return false
}

// colonDigit reports whether s has a colon followed by a digit.
func colonDigit(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == ':' && isDigit(s[i+1]) {
			return true
		}
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// replaceGroup replaces group g of every match of re with repl.
func replaceGroup(s string, re *regexp.Regexp, g int, repl string) string {
	ms := re.FindAllStringSubmatchIndex(s, -1)
	if ms == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range ms {
		from, to := m[2*g], m[2*g+1]
		if from < 0 || s[from:to] == repl {
			continue
		}
		b.WriteString(s[last:from])
		b.WriteString(repl)
		last = to
	}
	b.WriteString(s[last:])
	return b.String()
}

// replaceFunc replaces every match of re that f accepts with what f returns; f sees
// the match and where it is in s.
func replaceFunc(s string, re *regexp.Regexp, f func(m string, start, end int) (string, bool)) string {
	ms := re.FindAllStringIndex(s, -1)
	if ms == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range ms {
		repl, ok := f(s[m[0]:m[1]], m[0], m[1])
		if !ok {
			continue
		}
		b.WriteString(s[last:m[0]])
		b.WriteString(repl)
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

func isIPv6(a string) bool {
	if i := strings.IndexByte(a, '%'); i >= 0 {
		a = a[:i]
	}
	ip, err := netip.ParseAddr(a)
	return err == nil && ip.Is6()
}

func validPort(p string) bool {
	if p == "" {
		return true
	}
	n, err := strconv.Atoi(p)
	return err == nil && n <= 65535
}

func isWord(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isLetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }

// boundedBefore: the match at start is not the tail of a longer name or number.
func boundedBefore(s string, start int) bool {
	if start == 0 {
		return true
	}
	c := s[start-1]
	return !isWord(c) && c != '.' && c != '-' && c != '/' && c != '@' && c != '%'
}

// boundedAfter: the match ending at end is not the head of a longer name or number
// (a sentence's full stop after it is no part of it).
func boundedAfter(s string, end int) bool {
	if end == len(s) {
		return true
	}
	c := s[end]
	if c == '.' || c == '-' {
		return end+1 == len(s) || !isWord(s[end+1])
	}
	return !isWord(c)
}
