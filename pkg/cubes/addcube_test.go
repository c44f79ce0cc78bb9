package cubes_test

import (
	"crypto/sha256"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes"
)

// TestHookHeaderUpToDate: bpf/entry/cubes_gen.h is what the registry
// generates (run `make generate` after changing pkg/cubes/cubes.go).
func TestHookHeaderUpToDate(t *testing.T) {
	got, err := os.ReadFile("../../bpf/entry/cubes_gen.h")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != cube.CHeader(cubes.All) {
		t.Error("bpf/entry/cubes_gen.h is out of date with the registry: run `make generate` and commit the result")
	}
}

// TestAddingACube adds the counting cube (testdata/count: a header, a Go
// package with its test) to a copy of this tree with one registration
// line, regenerates, builds, and runs the cube's own test, which counts a
// packet through from_pod in the kernel. No file changes but the cube's
// own, the registry's and the generated ones.
func TestAddingACube(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("clang"); err != nil {
		t.Fatal("clang not found: run hack/install-deps.sh")
	}
	tree := copyTree(t, "../..")
	before := hashTree(t, tree)

	add := map[string]string{
		"testdata/count/count.h":           "bpf/cubes/count/count.h",
		"testdata/count/count.go.txt":      "pkg/cubes/count/count.go",
		"testdata/count/count_test.go.txt": "pkg/cubes/count/count_test.go",
	}
	for from, to := range add {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(tree, to), string(b))
	}
	registry := filepath.Join(tree, "pkg/cubes/cubes.go")
	src, err := os.ReadFile(registry)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(src), "\tlb.Cube{},\n", "\tlb.Cube{},\n\tcount.Cube{},\n", 1)
	edited = strings.Replace(edited, "\t\"github.com/netcube/netcube/pkg/cubes/ct\"\n",
		"\t\"github.com/netcube/netcube/pkg/cubes/count\"\n\t\"github.com/netcube/netcube/pkg/cubes/ct\"\n", 1)
	if edited == string(src) || strings.Count(edited, "\n") != strings.Count(string(src), "\n")+2 {
		t.Fatal("could not add the registration line (and its import) to pkg/cubes/cubes.go")
	}
	writeFile(t, registry, edited)

	for _, args := range [][]string{
		{"generate", "./pkg/cubes/"},
		{"generate", "./pkg/datapath/"},
		{"build", "./..."},
		{"vet", "./pkg/cubes/..."},
		{"test", "-count=1", "./pkg/cubes/count/"},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = tree
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	gen, err := os.ReadFile(filepath.Join(tree, "bpf/entry/cubes_gen.h"))
	if err != nil || !strings.Contains(string(gen), "count_from_pod(skb, f)") {
		t.Fatalf("the generated hooks do not call the counting cube: %v\n%s", err, gen)
	}

	allowed := []string{"bpf/cubes/count/count.h", "pkg/cubes/count/count.go", "pkg/cubes/count/count_test.go",
		"pkg/cubes/cubes.go",                                                             // the registration line
		"bpf/entry/cubes_gen.h", "pkg/datapath/bpf_bpfel.go", "pkg/datapath/bpf_bpfel.o"} // generated
	after := hashTree(t, tree)
	for path, h := range after {
		if before[path] != h && !slices.Contains(allowed, path) {
			t.Errorf("adding a cube changed %s", path)
		}
	}
	for path := range before {
		if _, ok := after[path]; !ok {
			t.Errorf("adding a cube removed %s", path)
		}
	}
}

// copyTree copies the module's source files (those git knows, committed
// or not) into a temporary directory.
func copyTree(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dst := t.TempDir()
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) { // deleted, not yet committed
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dst, f), string(b))
	}
	return dst
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// hashTree maps each file under root (relative path) to its hash.
func hashTree(t *testing.T, root string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		out[rel] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
