package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// poolMakers are the only files that make a certificate pool from scratch: the
// gateway reads every CA file through gateway/config's ReadCertPool (its error names
// the configuration key), and tests and tools make theirs through test/certpool.
var poolMakers = []string{"gateway/config/files.go", "test/certpool/certpool.go"}

// TestCertificatePoolsAreMadeInOnePlace fails on any other call of x509.NewCertPool or
// AppendCertsFromPEM, production code and tests alike.
func TestCertificatePoolsAreMadeInOnePlace(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "bin" || name == "vendor" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || slices.Contains(poolMakers, rel) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, _ := sel.X.(*ast.Ident)
			if (sel.Sel.Name == "NewCertPool" && pkg != nil && pkg.Name == "x509") || sel.Sel.Name == "AppendCertsFromPEM" {
				t.Errorf("%s: %s makes a certificate pool: use gateway/config.ReadCertPool (the gateway) or test/certpool (tests)", fset.Position(call.Pos()), sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
