package config

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

func TestATypeErrorNamesTheDottedKeyAndItsLine(t *testing.T) {
	const members = "[[registry.members]]\nid = \"a\"\nquery_endpoint = \"http://a/fhir\"\n"
	cases := []struct {
		name, doc, key string
		line           int
		message        string
	}{
		{"a key of a table", "[server]\nlisten = 1\n", "server.listen", 2, "must be a string, not an integer"},
		{"a dotted key", "\nserver.listen = 1\n", "server.listen", 2, "must be a string, not an integer"},
		{"a key of an inline table", "server = { listen = 1 }\n", "server.listen", 1, "must be a string, not an integer"},
		{"the second key of an inline table", "# c\n\nserver = { base_path = \"/x\", request_timeout_ms = \"30s\" }\n", "server.request_timeout_ms", 3, "must be an integer, not a string"},
		{"a key of a nested inline table", "[server]\ntls = { certificate_file = \"c\", key_file = true }\n", "server.tls.key_file", 2, "must be a string, not a boolean"},
		{"a key of the second entry of an array of tables", members + members + "timeout_ms = 1.5\n", "registry.members[1].timeout_ms", 7, "must be an integer, not a float"},
		{"a key of an inline array of tables", "[registry]\nmembers = [\n  { id = \"a\", query_endpoint = \"http://a/fhir\" },\n  { id = 7 },\n]\n", "registry.members[1].id", 4, "must be a string, not an integer"},
		{"an array of tables as an inline table", "registry = { members = [ { id = \"a\" }, { endpoint_id = [1] } ] }\n", "registry.members[1].endpoint_id", 1, "must be a string, not an array"},
		{"an element of an array", "[[auth.issuers]]\nissuer = \"i\"\nalgorithms = [\"RS256\", 1]\n", "auth.issuers[0].algorithms[1]", 3, "must be a string, not an integer"},
		{"a table written as a value", "server = 3\n", "server", 1, "must be a table, not an integer"},
		{"an array of tables written as a value", "[registry]\nmembers = \"a\"\n", "registry.members", 2, "must be an array of tables, not a string"},
		{"an integer past 64 bits", "[health]\ncheck_timeout_ms = 99999999999999999999\n", "health.check_timeout_ms", 2, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDoc([]byte(tc.doc), "t.toml", Options{})
			if err == nil {
				t.Fatal("accepted")
			}
			var ps *Problems
			if !errors.As(err, &ps) || len(ps.List) != 1 {
				t.Fatalf("want one problem, got %v", err)
			}
			p := ps.List[0]
			if p.Key != tc.key || p.Line != tc.line || !strings.Contains(p.Message, tc.message) {
				t.Fatalf("got %s; want %s (line %d): %s", p, tc.key, tc.line, tc.message)
			}
			for _, goName := range []string{"config.", "struct field", "int64", "[]string"} {
				if strings.Contains(p.String(), goName) {
					t.Fatalf("the problem %q names Go's %q", p, goName)
				}
			}
		})
	}
}

// problemDocuments are documents of about size bytes with problems that take finding:
// one wrong type on the last line after blank lines, and a problem on every line.
func problemDocuments(size int) map[string][]byte {
	var keys, tables, inline bytes.Buffer
	for i := 0; keys.Len() < size; i++ {
		fmt.Fprintf(&keys, "key_%d = 1\n", i)
	}
	for i := 0; tables.Len() < size; i++ {
		fmt.Fprintf(&tables, "[table_%d]\n", i)
	}
	inline.WriteString("registry.members = [\n")
	for i := 0; inline.Len() < size; i++ {
		fmt.Fprintf(&inline, "  { id = \"m%d\", query_endpoint = \"http://m/fhir\", key_%d = 1 },\n", i, i)
	}
	inline.WriteString("]\n")
	var under bytes.Buffer
	under.WriteString("[unknown]\n")
	for i := 0; under.Len() < size; i++ {
		fmt.Fprintf(&under, "key_%d = { a = 1, b = [{ c = 2 }] }\n", i)
	}
	return map[string][]byte{
		"keys under an unknown table":       under.Bytes(),
		"a wrong type after blank lines":    append(bytes.Repeat([]byte("\n"), size), "[server]\nlisten = 1\n"...),
		"an unknown key on every line":      keys.Bytes(),
		"an unknown table on every line":    tables.Bytes(),
		"an unknown key in every element":   inline.Bytes(),
		"a wrong type after a long comment": append(append([]byte("# "), bytes.Repeat([]byte("x"), size)...), "\nserver = { listen = 1 }\n"...),
	}
}

// allocatedBy is the bytes f allocates.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestProblemReportingIsLinear: the bytes Parse allocates to report the problems of a
// document grow as the document does. Finding a problem's line used to copy the rest
// of the document for each line before it, and go-toml splits the whole document for
// each unknown key it reports: 16 times the document was about 256 times the bytes.
func TestProblemReportingIsLinear(t *testing.T) {
	const small, factor = 4 << 10, 16
	smalls, larges := problemDocuments(small), problemDocuments(small*factor)
	for name, doc := range smalls {
		t.Run(name, func(t *testing.T) {
			parse := func(doc []byte) func() {
				return func() {
					if _, err := parseDoc(doc, "t.toml", Options{SkipFiles: true}); err == nil {
						t.Fatal("accepted")
					}
				}
			}
			parse(doc)() // the caches of the schema's types
			a, b := allocatedBy(parse(doc)), allocatedBy(parse(larges[name]))
			ratio := float64(b) / float64(a)
			t.Logf("%d bytes allocated for %d bytes, %d for %d: %.1f times", a, len(doc), b, len(larges[name]), ratio)
			// Slices and maps grown by doubling make linear growth up to twice the
			// factor; quadratic growth is the factor squared.
			if ratio > 4*factor {
				t.Fatalf("%d bytes allocated for %d bytes, %d for %d: %.0f times the bytes for %d times the document",
					a, len(doc), b, len(larges[name]), ratio, factor)
			}
		})
	}
}

// BenchmarkParseProblemAtTheEnd is Parse of documents with problems that take finding
// (problemDocuments) of 64 KiB and 1 MiB: ns/op of 1MiB is about 16 times 64KiB's in a
// linear report (it was about 256 times: the line of a problem copied the rest of the
// document for each line before it).
func BenchmarkParseProblemAtTheEnd(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20} {
		for name, doc := range problemDocuments(size) {
			b.Run(fmt.Sprintf("%s/%dKiB", strings.ReplaceAll(name, " ", "_"), size>>10), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(doc)))
				for b.Loop() {
					if _, err := parseDoc(doc, "b.toml", Options{SkipFiles: true}); err == nil {
						b.Fatal("accepted")
					}
				}
			})
		}
	}
}

// TestUnknownKeysAsGoToml holds unknownKeys to go-toml's DisallowUnknownFields: the same
// unknown keys, on the same lines, named alike (inside inline tables, unknownKeys names
// the path go-toml leaves out; the key go-toml names ends it).
func TestUnknownKeysAsGoToml(t *testing.T) {
	for _, doc := range []string{
		"mystery = 1\n[server]\nlisen = 2\n[server.tls.x]\ny = 3\n",
		"[servers]\nlisten = \"x\"\nother = 1\n[servers.sub]\n[server]\nLISTEN = \"a:1\"\nBase_Path = \"/x\"\n",
		"server.tls.nope = 1\nserver.tls.key_file = \"k\"\n",
		"[[registry.members]]\nid = \"a\"\nx = 1\n[[registry.members]]\ny = 2\n[registry.members.z]\n[[registry.members.w]]\n",
		"server = { listen = \":1\", nope = 1, tls = { x = 1, key_file = \"k\" } }\n",
		"registry.members = [{ id = \"a\", q = 1 }, { id = \"b\" }, { r = [1] }]\n[health]\ncheck_timeout_ms = 1\nfoo.bar = 2\n",
		"[auth]\nissuers = [\n  # c\n  { issuer = \"i\", bad = 1 },\n]\n[\"\"]\n[server]\n\"a.b\" = 1\n",
		"[audit]\ndestination = \"log\"\n[audit.feed]\nurl = \"u\"\nretries = 3\n[pdqm]\nx = 1\n[stored_queries]\nfolder = 1\n",
		"[registry.mcsd]\nrefresh_ms = 1\n[limits]\nnope = 1\n[forwarding]\nnope = 1\n[pmir]\nnope = 1\n",
	} {
		ours, theirs := unknownKeys([]byte(doc), reflect.TypeFor[Config]()), goTomlUnknownKeys(t, []byte(doc))
		if err := sameUnknownKeys(ours, theirs); err != nil {
			t.Errorf("%q: %v", doc, err)
		}
	}
}

// goTomlUnknownKeys are the unknown keys go-toml's DisallowUnknownFields finds in doc,
// or nil when doc does not decode.
func goTomlUnknownKeys(tb testing.TB, doc []byte) []Problem {
	c := defaults()
	err := toml.NewDecoder(bytes.NewReader(doc)).DisallowUnknownFields().Decode(&c)
	var strict *toml.StrictMissingError
	if !errors.As(err, &strict) {
		return nil
	}
	var out []Problem
	for _, e := range strict.Errors {
		row, _ := e.Position()
		out = append(out, Problem{Key: dottedKey(e.Key()), Line: row, Message: "unknown key"})
	}
	return out
}

func sameUnknownKeys(ours, theirs []Problem) error {
	if len(ours) != len(theirs) {
		return fmt.Errorf("unknownKeys found %v, go-toml %v", ours, theirs)
	}
	for i := range ours {
		o, g := ours[i], theirs[i]
		last := g.Key[strings.LastIndex(g.Key, ".")+1:] // go-toml's last key part
		if o.Line != g.Line || o.Key != g.Key && !strings.HasSuffix(o.Key, "."+last) {
			return fmt.Errorf("unknownKeys found %v, go-toml %v", ours, theirs)
		}
	}
	return nil
}

// TestADocumentOfManyUnknownKeysIsNotDecoded: past MaxUnknownKeys keys that no key of
// ferrofed.toml takes, a document is refused with its first unknown keys, their count
// and its syntax error, without go-toml's decode (whose check of duplicate keys costs,
// for each key, the keys before it in its table).
func TestADocumentOfManyUnknownKeysIsNotDecoded(t *testing.T) {
	keys := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "key_%d = 1\n", i)
		}
		return b.String()
	}
	cases := []struct {
		name, doc string
		problems  int
		last      string
	}{
		{"as many as allowed: decoded, every one listed with the other problems", keys(MaxUnknownKeys) + "[server]\nrequest_timeout_ms = 0\n",
			MaxUnknownKeys + 1, "server.request_timeout_ms (line 102): must be greater than zero"},
		{"one more", keys(MaxUnknownKeys+1) + "[server]\nrequest_timeout_ms = 0\n", MaxUnknownKeys + 1,
			"(document): has 101 keys that no key of ferrofed.toml takes (101 unknown keys, and the keys under them), more than 100: the first 100 unknown keys are listed"},
		{"keys under an unknown table", "[nope]\n" + keys(MaxUnknownKeys), 2,
			"(document): has 101 keys that no key of ferrofed.toml takes (1 unknown keys, and the keys under them)"},
		{"keys of an unknown inline table", "nope = { " + strings.Repeat("a = { b = 1 }, ", 50) + "}\n", 2,
			"(document): has 101 keys that no key of ferrofed.toml takes (1 unknown keys"},
		{"and a syntax error", keys(1000) + "[server\n", MaxUnknownKeys + 2, "(document) (line 1001): toml: expected ']' to close table name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDoc([]byte(tc.doc), "t.toml", Options{SkipFiles: true})
			var ps *Problems
			if !errors.As(err, &ps) {
				t.Fatalf("got %v, want *Problems", err)
			}
			if got := ps.List[len(ps.List)-1].String(); len(ps.List) != tc.problems || !strings.HasPrefix(got, tc.last) {
				t.Fatalf("%d problems, the last %q; want %d, the last starting %q", len(ps.List), got, tc.problems, tc.last)
			}
			over := !strings.HasPrefix(tc.name, "as many")
			if c := CheckUnknownKeys([]byte(tc.doc), "t.toml"); (c != nil) != over || over && c.Error() != err.Error() {
				t.Fatalf("CheckUnknownKeys: %v; want Parse's refusal: %t", c, over)
			}
		})
	}
}
