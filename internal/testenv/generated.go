package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// BPFObjectUpToDate rebuilds the BPF object and Go bindings of the package
// in the current directory exactly as `go generate` does (the bpf2go line
// in gen.go is the one source of the command) into a temporary directory,
// and fails if the committed files differ: the C layouts and the Go types
// can never drift apart.
func BPFObjectUpToDate(t *testing.T, goPackage string) {
	t.Helper()
	if _, err := exec.LookPath("clang"); err != nil {
		t.Fatal("clang not found: run hack/install-deps.sh")
	}
	src, err := os.ReadFile("gen.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^//go:generate go tool bpf2go (.*)$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("no bpf2go go:generate line in gen.go")
	}
	out := t.TempDir()
	args := append([]string{"tool", "bpf2go", "-output-dir", out}, splitArgs(string(m[1]))...)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOPACKAGE="+goPackage)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bpf2go: %v\n%s", err, b)
	}
	for _, f := range []string{"bpf_bpfel.go", "bpf_bpfel.o"} {
		fresh, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fresh, committed) {
			t.Errorf("%s is out of date with bpf/: run `make generate` and commit the result", f)
		}
	}
}

// splitArgs splits a go:generate line the way go generate does: on spaces,
// with double-quoted strings kept whole.
func splitArgs(s string) []string {
	var args []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '"' {
			end := strings.IndexByte(s[1:], '"') + 1
			args = append(args, s[1:end])
			s = s[end+1:]
			continue
		}
		end := strings.IndexByte(s, ' ')
		if end < 0 {
			end = len(s)
		}
		args = append(args, s[:end])
		s = s[end:]
	}
	return args
}
