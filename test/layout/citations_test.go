package layout

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The repository explains itself: a comment, a script or a page that cites a design
// cites a file under docs/ (or nothing), never a document that is not in the
// repository. These are the ways such a citation has been written.
var outside = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile(`\bDESIGN\b`), "a design document that is not in the repository (cite docs/)"},
	{regexp.MustCompile(`\bBINDINGS\b`), "a bindings document that is not in the repository (cite docs/bindings.md)"},
	{regexp.MustCompile(`\bSTYLE\.md\b`), "a style guide that is not in the repository"},
	{regexp.MustCompile(`\bLOCAL-CLUSTER\b`), "a cluster document that is not in the repository"},
	{regexp.MustCompile(`(^|[^\w.-])(\.\./)+shared/|/work/(shared|main|wt)\b`), "a folder outside the repository"},
	{regexp.MustCompile(`\bseeds/`), "a seed document that is not in the repository"},
	{regexp.MustCompile(`^\s*(//|#)\s*§`), "a section number left over from a citation split across lines"},
	{regexp.MustCompile(`\bthe seed's\b|\(the seed\b|\bthe seed, key by key\b`), "a seed document that is not in the repository (cite docs/)"},
}

// docCite is a citation of a page under docs/, with an optional section: an anchor
// (docs/x.md#some-heading) or a quoted heading (docs/x.md, "Heading" or
// docs/x.md ("Heading")).
var docCite = regexp.MustCompile(`\bdocs/([\w.-]+\.md)(?:#([\w-]+)|,? \(?"([^"]+)")?`)

// mdLink is a Markdown link or image target.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// skipDirs are never read: not the repository's text, or built here.
var skipDirs = []string{".git", "bin", "node_modules", ".demo"}

// thisFile is this test, which spells the patterns it looks for.
const thisFile = "test/layout/citations_test.go"

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// repoFiles lists the repository's files, slash-separated and relative to root: what
// git tracks plus what it would track (new files not yet added), or, without git,
// every file outside skipDirs.
func repoFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		var files []string
		for f := range strings.SplitSeq(string(out), "\x00") {
			if f == "" || slices.Contains(skipDirs, strings.SplitN(f, "/", 2)[0]) {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, f)); err == nil { // deleted, not yet committed
				files = append(files, f)
			}
		}
		return files
	}
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && slices.Contains(skipDirs, d.Name()) {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// readText reads a file, or returns false for a binary one.
func readText(t *testing.T, p string) ([]byte, bool) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
		return nil, false
	}
	return data, true
}

// slug is GitHub's anchor of a Markdown heading: lower case, punctuation other than
// '-' and '_' dropped, spaces made hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

var mdHeading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#*$`)

// headings returns the anchors and the plain text (without backticks) of a Markdown
// file's headings, or false when the file does not exist.
func headings(t *testing.T, p string, cache map[string][]string) ([]string, bool) {
	t.Helper()
	if h, ok := cache[p]; ok {
		return h, h != nil
	}
	data, err := os.ReadFile(p)
	if err != nil {
		cache[p] = nil
		return nil, false
	}
	h := []string{}
	inFence := false
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if m := mdHeading.FindStringSubmatch(line); m != nil && !inFence {
			h = append(h, slug(m[1]), strings.ToLower(strings.ReplaceAll(m[1], "`", "")))
		}
	}
	cache[p] = h
	return h, true
}

// problems are the references of the repository's files to anything outside it, and
// its citations of docs/ pages (and their sections) that do not exist, each as
// "file:line: why".
func problems(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	cache := map[string][]string{}
	for _, f := range repoFiles(t, root) {
		if f == thisFile {
			continue
		}
		data, ok := readText(t, filepath.Join(root, f))
		if !ok {
			continue
		}
		isMarkdown := strings.HasSuffix(f, ".md")
		for i, line := range strings.Split(string(data), "\n") {
			at := fmt.Sprintf("%s:%d", f, i+1)
			for _, o := range outside {
				if m := o.re.FindString(line); m != "" {
					out = append(out, fmt.Sprintf("%s: %q cites %s", at, strings.TrimSpace(m), o.what))
				}
			}
			for _, m := range docCite.FindAllStringSubmatch(line, -1) {
				page := filepath.Join(root, "docs", m[1])
				h, ok := headings(t, page, cache)
				switch {
				case !ok:
					out = append(out, fmt.Sprintf("%s: cites docs/%s, which does not exist", at, m[1]))
				case m[2] != "" && !slices.Contains(h, m[2]):
					out = append(out, fmt.Sprintf("%s: cites docs/%s#%s, a section it does not have", at, m[1], m[2]))
				case m[3] != "" && !slices.Contains(h, strings.ToLower(strings.ReplaceAll(m[3], "`", ""))):
					out = append(out, fmt.Sprintf("%s: cites docs/%s, %q, a section it does not have", at, m[1], m[3]))
				}
			}
			if !isMarkdown || strings.Contains("/"+f, "/testdata/") {
				continue // a copy of someone else's page keeps its own links
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				p := filepath.Join(root, filepath.FromSlash(f))
				if file != "" {
					p = filepath.Join(root, filepath.FromSlash(path.Join(path.Dir(f), file)))
				}
				rel, err := filepath.Rel(root, p)
				if err != nil || strings.HasPrefix(rel, "..") {
					out = append(out, fmt.Sprintf("%s: links %s, outside the repository", at, target))
					continue
				}
				if _, err := os.Stat(p); err != nil {
					out = append(out, fmt.Sprintf("%s: links %s, which does not exist", at, target))
					continue
				}
				if anchor != "" && strings.HasSuffix(p, ".md") {
					if h, _ := headings(t, p, cache); !slices.Contains(h, anchor) {
						out = append(out, fmt.Sprintf("%s: links %s, a section %s does not have", at, target, rel))
					}
				}
			}
		}
	}
	return out
}

// TestNothingCitesOutsideTheRepository keeps every design citation inside the
// repository: no file names a document or a folder that is not in it, and every
// docs/ page (and section) a file cites, or a Markdown file links, exists.
func TestNothingCitesOutsideTheRepository(t *testing.T) {
	for _, p := range problems(t, repoRoot(t)) {
		t.Error(p)
	}
}

// The checker itself: each kind of reference it must catch, in a repository of its
// own, and none of the forms it must let through.
func TestTheCitationCheckCatchesEachKind(t *testing.T) {
	root := t.TempDir()
	write := func(name, body string) {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/bindings.md", "# The bindings\n\n## Consent\n\n```\n# not a heading\n```\n")
	write("ok.go", `package ok

// docs/bindings.md, "Consent"; docs/bindings.md#consent; docs/bindings.md ("The bindings").
// f.Add(seed) runs the seeds; a seeded rng; shared state; DESIGNATED is a word.
`)
	write("README.md", "[b](docs/bindings.md#consent) [x](https://example.org/x) [self](#top)\n\n# Top\n")
	bad := map[string]string{
		"a.go":              "// The flow (DESIGN §2.7).\n",
		"b.go":              "// The resolver (BINDINGS.md §2.1).\n",
		"c.sh":              "# see ../shared/LOCAL-CLUSTER.md\n",
		"d.go":              "// the seed's rule\n",
		"e.yaml":            "# from seeds/000.txt\n",
		"f.go":              "// docs/gone.md\n",
		"g.go":              "// docs/bindings.md, \"Nothing\"\n",
		"h.go":              "// docs/bindings.md#nothing\n",
		"i.md":              "[gone](docs/gone.md)\n",
		"j.md":              "[up](../outside.md)\n",
		"k.md":              "[no section](docs/bindings.md#not-a-heading)\n",
		"l.go":              "// (the seed, key by key)\n",
		"m.go":              "// STYLE.md says so\n",
		"n.go":              "// /work/shared/DESIGN.md\n",
		"docs/bindings2.md": "See BINDINGS.md.\n",
	}
	for name, body := range bad {
		write(name, body)
	}
	got := problems(t, root)
	for name := range bad {
		if !slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, name+":") }) {
			t.Errorf("%s: not reported; reported: %q", name, got)
		}
	}
	for _, p := range got {
		if strings.HasPrefix(p, "ok.go:") || strings.HasPrefix(p, "README.md:") {
			t.Errorf("reported a citation that is fine: %s", p)
		}
	}
}
