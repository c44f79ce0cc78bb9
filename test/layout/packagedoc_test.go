package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestEveryPackageSaysWhatItIs: every Go package of the tree (tests-only
// packages aside) has a doc comment, "Package x ..." or, for a command,
// "Command x ...", so the tree says what each directory is.
func TestEveryPackageSaysWhatItIs(t *testing.T) {
	root := "../.."
	var bare, seen []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
			return filepath.SkipDir
		}
		pkgs, err := parser.ParseDir(token.NewFileSet(), path, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		for _, p := range pkgs {
			rel, _ := filepath.Rel(root, path)
			seen = append(seen, rel)
			documented := false
			for _, f := range p.Files {
				if f.Doc != nil && (strings.HasPrefix(f.Doc.Text(), "Package "+p.Name) || strings.HasPrefix(f.Doc.Text(), "Command ")) {
					documented = true
				}
			}
			if !documented {
				bare = append(bare, rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Positive control: the walk reads the tree's packages.
	if !slices.Contains(seen, "pkg/cubes/lb") || !slices.Contains(seen, "cmd/netcube") {
		t.Fatalf("the walk found no pkg/cubes/lb or cmd/netcube among %d packages", len(seen))
	}
	if len(bare) > 0 {
		t.Errorf("packages without a doc comment: %v", bare)
	}
}
