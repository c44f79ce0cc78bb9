package layout

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// code is a `...` span of Markdown.
var code = regexp.MustCompile("`([^`]+)`")

// topDirs are the repository's top directories: a code span that starts
// with one of them is a path.
var topDirs = []string{"bpf/", "cmd/", "pkg/", "lab/", "internal/", "test/", "deploy/", "docs/", "hack/"}

// pathsNamed lists the repository paths a Markdown text names in code spans.
func pathsNamed(md string) []string {
	var paths []string
	for _, m := range code.FindAllStringSubmatch(md, -1) {
		p := strings.TrimSuffix(m[1], "/")
		if slices.ContainsFunc(topDirs, func(d string) bool { return strings.HasPrefix(p, d) }) && !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	return paths
}

// missing are the paths that do not exist under root.
func missing(root string, paths []string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			out = append(out, p)
		}
	}
	return out
}

// TestArchitecturePagePathsExist: every path docs/architecture.md names
// exists, so the page cannot go on describing a tree that has moved.
func TestArchitecturePagePathsExist(t *testing.T) {
	root := "../.."
	md, err := os.ReadFile(filepath.Join(root, "docs/architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths := pathsNamed(string(md))
	// Positive control: the page is read as paths (the tour names at
	// least the agent and a cube), and a path that is not there is caught.
	if !slices.Contains(paths, "cmd/netcube-agent") || !slices.Contains(paths, "bpf/cubes/lb/lb_maps.h") {
		t.Fatalf("the paths read from docs/architecture.md lack cmd/netcube-agent or bpf/cubes/lb/lb_maps.h: %v", paths)
	}
	if got := missing(root, pathsNamed("`pkg/cubes/lb/no_such_file.go` and `lab/sandbox`")); !slices.Equal(got, []string{"pkg/cubes/lb/no_such_file.go"}) {
		t.Fatalf("the check of a made-up path found %v missing", got)
	}
	if bad := missing(root, paths); len(bad) > 0 {
		t.Errorf("docs/architecture.md names paths that do not exist: %v", bad)
	} else {
		t.Logf("%d paths named, all present", len(paths))
	}
}
