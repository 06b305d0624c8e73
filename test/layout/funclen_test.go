package layout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxFunctionLines is the longest a production function under gateway/ may be,
// counted from its func line to its closing brace: a longer one is split into named
// steps (issue 24, "the data plane in rooms").
const maxFunctionLines = 80

// maxFederationLines bounds gateway/federation's production lines: what grows past
// it goes into a package of its own (docs/architecture.md, "The parts").
const maxFederationLines = 2500

// funcSpan is one function declaration and how many lines it spans.
type funcSpan struct {
	pos   string // file:line
	name  string // Recv.Name or Name
	lines int
}

// funcSpans lists the function declarations of a Go file's source.
func funcSpans(fset *token.FileSet, name string, src any) ([]funcSpan, error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []funcSpan
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		n := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) > 0 {
			n = receiverName(fd.Recv.List[0].Type) + "." + n
		}
		start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
		out = append(out, funcSpan{pos: fmt.Sprintf("%s:%d", name, start.Line), name: n, lines: end.Line - start.Line + 1})
	}
	return out, nil
}

func receiverName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return receiverName(t.X)
	case *ast.IndexExpr:
		return receiverName(t.X)
	case *ast.IndexListExpr:
		return receiverName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

// productionFiles are the non-test Go files under dir (relative to the repository's
// root), testdata left out.
func productionFiles(t *testing.T, dir string) []string {
	t.Helper()
	root := filepath.Join("..", "..")
	var files []string
	err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestFuncSpansCountFromFuncToClosingBrace(t *testing.T) {
	const src = `package p

func one() {}

func three() {
	_ = 1
}

type T struct{}

func (t *T) four() {
	_ = 1
	_ = 2
}

func declared()
`
	spans, err := funcSpans(token.NewFileSet(), "p.go", src)
	if err != nil {
		t.Fatal(err)
	}
	want := []funcSpan{{"p.go:3", "one", 1}, {"p.go:5", "three", 3}, {"p.go:11", "T.four", 4}}
	if fmt.Sprint(spans) != fmt.Sprint(want) {
		t.Fatalf("funcSpans = %v, want %v", spans, want)
	}
}

func TestNoProductionFunctionUnderGatewayIsTooLong(t *testing.T) {
	fset := token.NewFileSet()
	var long []string
	for _, f := range productionFiles(t, "gateway") {
		spans, err := funcSpans(fset, f, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range spans {
			if s.lines > maxFunctionLines {
				long = append(long, fmt.Sprintf("%s: %s is %d lines", strings.TrimPrefix(filepath.ToSlash(s.pos), "../../"), s.name, s.lines))
			}
		}
	}
	if len(long) > 0 {
		t.Errorf("production functions under gateway/ longer than %d lines (split each into named steps):\n%s", maxFunctionLines, strings.Join(long, "\n"))
	}
}

func TestFederationStaysWithinItsLines(t *testing.T) {
	total := 0
	per := map[string]int{}
	for _, f := range productionFiles(t, filepath.Join("gateway", "federation")) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := strings.Count(string(data), "\n")
		if len(data) > 0 && data[len(data)-1] != '\n' {
			n++
		}
		per[filepath.Base(f)] = n
		total += n
	}
	if total > maxFederationLines {
		names := make([]string, 0, len(per))
		for f := range per {
			names = append(names, f)
		}
		sort.Slice(names, func(i, j int) bool { return per[names[i]] > per[names[j]] })
		var b strings.Builder
		for _, f := range names {
			fmt.Fprintf(&b, "%6d  gateway/federation/%s\n", per[f], f)
		}
		t.Errorf("gateway/federation holds %d production lines, more than %d: move a part into a package of its own\n%s", total, maxFederationLines, b.String())
	}
}
