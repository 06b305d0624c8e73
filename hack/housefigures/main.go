// Command housefigures prints the figures issue 24 ("the house") is measured by: the
// production lines of each package, the longest production functions, how many
// packages a client of the API pulls in, and the lines of the per-package test
// harnesses. Run it from the repository's root: `go run ./hack/housefigures`.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

type function struct {
	name  string
	lines int
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "housefigures:", err)
		os.Exit(1)
	}
}

func run() error {
	lines := map[string]int{}
	var funcs []function
	harness := map[string]int{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "node_modules", ".demo", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		n, err := countLines(path)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, "_test.go") {
			if strings.Contains(filepath.Base(path), "harness") {
				harness[path] = n
			}
			return nil
		}
		lines[filepath.Dir(path)] += n
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) > 0 {
				name = recvName(fd.Recv.List[0].Type) + "." + name
			}
			span := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			funcs = append(funcs, function{name: path + ": " + name, lines: span})
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Println("## production lines per package")
	pkgs := make([]string, 0, len(lines))
	for p := range lines {
		pkgs = append(pkgs, p)
	}
	sort.Slice(pkgs, func(i, j int) bool { return lines[pkgs[i]] > lines[pkgs[j]] })
	for _, p := range pkgs {
		fmt.Printf("%6d  %s\n", lines[p], p)
	}
	fmt.Println("\n## the ten longest production functions")
	sort.Slice(funcs, func(i, j int) bool { return funcs[i].lines > funcs[j].lines })
	for _, f := range funcs[:min(10, len(funcs))] {
		fmt.Printf("%6d  %s\n", f.lines, f.name)
	}
	fmt.Println("\n## test harness files")
	total := 0
	for _, p := range sortedKeys(harness) {
		fmt.Printf("%6d  %s\n", harness[p], p)
		total += harness[p]
	}
	fmt.Printf("%6d  in all\n", total)
	out, err := exec.Command("go", "list", "-deps", "./api/...").Output()
	if err != nil {
		return fmt.Errorf("go list -deps ./api/...: %w", err)
	}
	fmt.Printf("\n## go list -deps ./api/...: %d packages\n", bytes.Count(out, []byte("\n")))
	return nil
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for s.Scan() {
		n++
	}
	return n, s.Err()
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
