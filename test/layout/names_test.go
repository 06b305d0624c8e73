package layout

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPackageNamesEqualTheirFolders keeps every ferrofed package named for its folder,
// so that no importer has to invent a name for it (docs/architecture.md, "Names").
func TestPackageNamesEqualTheirFolders(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Name}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		importPath, name, _ := strings.Cut(line, " ")
		if name == "main" || importPath == module {
			continue
		}
		checked++
		if want := path.Base(importPath); name != want {
			t.Errorf("package %s is named %q, want %q (its folder)", importPath, name, want)
		}
	}
	if checked < 20 {
		t.Fatalf("only %d packages checked: go list found too few", checked)
	}
}

// TestFerrofedImportsTakeNoAlias: a ferrofed package is imported under its own name.
// An API version package (api/v1alpha1) is the one exception, imported as
// ferrofedv1alpha1 as Kubernetes code imports API groups.
func TestFerrofedImportsTakeNoAlias(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("git", "ls-files", "*.go")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	fset := token.NewFileSet()
	files := 0
	for _, rel := range strings.Fields(string(out)) {
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		files++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if imp.Name == nil || !strings.HasPrefix(p, module+"/") || imp.Name.Name == "_" {
				continue
			}
			if imp.Name.Name == "ferrofedv1alpha1" && p == module+"/api/v1alpha1" {
				continue
			}
			t.Errorf("%s imports %s as %s; import it under its own name", rel, p, imp.Name.Name)
		}
	}
	if files < 100 {
		t.Fatalf("only %d Go files read", files)
	}
}
