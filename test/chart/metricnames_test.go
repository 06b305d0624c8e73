package chart

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// registeredMetrics reads the metrics the gateway and the operator register from their
// source: every prometheus.New{Counter,Gauge,Histogram,Summary}[Vec] of a ferrofed_
// name and every prometheus.NewDesc, with their label names (a histogram also as its
// _bucket, _sum and _count series, _bucket with le).
func registeredMetrics(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, dir := range []string{"gateway", "controllers"} {
		pkgs := map[string][]*ast.File{}
		fset := token.NewFileSet()
		err := filepath.WalkDir(filepath.Join(repoRoot(t), dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			pkgs[filepath.Dir(p)] = append(pkgs[filepath.Dir(p)], f)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, files := range pkgs {
			consts := stringConsts(files)
			str := func(e ast.Expr) string {
				switch e := e.(type) {
				case *ast.BasicLit:
					s, _ := strconv.Unquote(e.Value)
					return s
				case *ast.Ident:
					return consts[e.Name]
				}
				return ""
			}
			strs := func(e ast.Expr) []string {
				var l []string
				if c, ok := e.(*ast.CompositeLit); ok {
					for _, el := range c.Elts {
						l = append(l, str(el))
					}
				}
				return l
			}
			for _, f := range files {
				ast.Inspect(f, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok || len(call.Args) == 0 {
						return true
					}
					if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "prometheus" {
						return true
					}
					fn := sel.Sel.Name
					var name string
					var labels []string
					switch {
					case fn == "NewDesc" && len(call.Args) >= 3:
						name, labels = str(call.Args[0]), strs(call.Args[2])
					case strings.HasPrefix(fn, "New") && slices.Contains([]string{"Counter", "Gauge", "Histogram", "Summary"}, strings.TrimSuffix(strings.TrimPrefix(fn, "New"), "Vec")):
						opts, ok := call.Args[0].(*ast.CompositeLit)
						if !ok {
							return true
						}
						for _, el := range opts.Elts {
							if kv, ok := el.(*ast.KeyValueExpr); ok {
								if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Name" {
									name = str(kv.Value)
								}
							}
						}
						if len(call.Args) >= 2 {
							labels = strs(call.Args[1])
						}
					default:
						return true
					}
					if !strings.HasPrefix(name, "ferrofed_") {
						return true
					}
					out[name] = labels
					if strings.HasPrefix(fn, "NewHistogram") {
						out[name+"_bucket"] = append(slices.Clone(labels), "le")
						out[name+"_sum"], out[name+"_count"] = labels, labels
					}
					return true
				})
			}
		}
	}
	// The reading itself, on metrics whose registration is known.
	for name, labels := range map[string][]string{
		"ferrofed_readiness":                       nil,
		"ferrofed_dependency_state":                {"dependency", "endpoint", "state"}, // a const name and a NewDesc
		"ferrofed_audit_spool_undelivered_records": {"destination"},
		"ferrofed_operator_drains_total":           {"outcome"},
		"ferrofed_operator_drain_seconds_bucket":   {"le"},
		"ferrofed_tls_certificate_expiry_seconds":  nil,
	} {
		if got, ok := out[name]; !ok || !equalJSON(got, labels) {
			t.Fatalf("reading the source found %s with labels %v (%v), want %v", name, got, ok, labels)
		}
	}
	if _, ok := out["ferrofed_no_such_metric"]; ok || len(out) < 25 {
		t.Fatalf("reading the source found %d metrics: %v", len(out), keys(out))
	}
	return out
}

// stringConsts are the string constants declared in files.
func stringConsts(files []*ast.File) map[string]string {
	out := map[string]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							out[n.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
		}
	}
	return out
}
