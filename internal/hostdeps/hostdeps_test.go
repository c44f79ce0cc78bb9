package hostdeps

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/netcube/netcube/lab/images"
)

// notFromDebian are programs the code runs that no Debian package
// installs, each with the one reason that applies to it.
var notFromDebian = map[string]string{
	"go": "the Go toolchain: the README's one requirement before make deps (install-deps.sh checks it)",
}

// root is the repository's top directory.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "hack/install-deps.sh")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// listed reads the packages hack/install-deps.sh installs (its packages=(
// ... ) array, comments dropped).
func listed(t *testing.T, repo string) map[string]bool {
	t.Helper()
	f, err := os.Open(filepath.Join(repo, "hack/install-deps.sh"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pkgs := map[string]bool{}
	in := false
	for s := bufio.NewScanner(f); s.Scan(); {
		line, _, _ := strings.Cut(s.Text(), "#")
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "packages=("):
			in = true
			line = strings.TrimPrefix(line, "packages=(")
		case !in:
			continue
		}
		if i := strings.Index(line, ")"); i >= 0 {
			line, in = line[:i], false
		}
		for _, p := range strings.Fields(line) {
			pkgs[p] = true
		}
	}
	return pkgs
}

// A use is a host file the project's code names, and where.
type use struct {
	path  string // on this machine
	where string // file:line of the name
}

var programName = regexp.MustCompile(`^[a-z][a-z0-9._+-]{0,40}$`)

// hostDirs hold programs and libraries; a path elsewhere (/sys, /run,
// /etc, ...) is no program of a package.
var hostDirs = []string{"/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/", "/lib/", "/usr/lib/", "/usr/libexec/"}

// launchers are the calls whose argument at the index given is a program
// to run: exec's, sb.Output's (after the pod), and lab/sandbox's run
// (only there: elsewhere a "run" is something else).
var launchers = map[string]int{"Command": 0, "CommandContext": 1, "Output": 1, "sandbox.run": 0}

// programsNamed finds the programs of this machine the repository's Go
// code (tests included) runs: the program argument of exec.Command and of
// the launchers, the program after "exec" (ip netns exec NS prog) or "--"
// (nsenter ... -- prog) in any call's arguments, and every absolute path
// in a program directory (the files the images copy). A name that is not
// on this machine at all fails too: it would on a fresh one.
func programsNamed(t *testing.T, repo string) (uses []use, missing []use, skipped map[string]string) {
	t.Helper()
	skipped = map[string]string{}
	fset := token.NewFileSet()
	lit := func(e ast.Expr) (string, bool) {
		b, ok := e.(*ast.BasicLit)
		if !ok || b.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(b.Value)
		return s, err == nil
	}
	err := filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "bin" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		at := func(n ast.Node) string {
			pos := fset.Position(n.Pos())
			rel, _ := filepath.Rel(repo, pos.Filename)
			return rel + ":" + strconv.Itoa(pos.Line)
		}
		add := func(name string, n ast.Node) {
			if why, ok := notFromDebian[name]; ok {
				skipped[name] = why
				return
			}
			if strings.HasPrefix(name, "/") {
				if strings.HasSuffix(name, "/") || !slices.ContainsFunc(hostDirs, func(d string) bool { return strings.HasPrefix(name, d) }) {
					return
				}
				if st, err := os.Stat(name); err != nil || !st.Mode().IsRegular() {
					missing = append(missing, use{path: name, where: at(n)})
					return
				}
				uses = append(uses, use{path: name, where: at(n)})
				return
			}
			if !programName.MatchString(name) {
				return // a path of the project's own (bin/netcube, a tools directory)
			}
			path, err := exec.LookPath(name)
			if err != nil {
				missing = append(missing, use{path: name, where: at(n)})
				return
			}
			uses = append(uses, use{path: path, where: at(n)})
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ImportSpec:
				return false
			case *ast.BasicLit:
				if s, ok := lit(n); ok && strings.HasPrefix(s, "/") {
					add(s, n)
				}
			case *ast.CallExpr:
				var fn string
				switch f := n.Fun.(type) {
				case *ast.SelectorExpr:
					fn = f.Sel.Name
				case *ast.Ident:
					fn = f.Name
				}
				if _, ok := n.Fun.(*ast.Ident); ok && f.Name.Name == "sandbox" {
					fn = "sandbox." + fn
				}
				if i, ok := launchers[fn]; ok && len(n.Args) > i {
					if s, ok := lit(n.Args[i]); ok && !strings.HasPrefix(s, "/") {
						add(s, n.Args[i])
					}
				}
				for i, a := range n.Args {
					s, ok := lit(a)
					if !ok {
						continue
					}
					next := -1
					switch {
					case s == "--" && i+1 < len(n.Args):
						next = i + 1
					case s == "exec" && i > 0 && i+2 < len(n.Args):
						if prev, _ := lit(n.Args[i-1]); prev == "netns" {
							next = i + 2
						}
					}
					if next >= 0 {
						if prog, ok := lit(n.Args[next]); ok && !strings.HasPrefix(prog, "-") && !strings.HasPrefix(prog, "/") {
							add(prog, n.Args[next])
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return uses, missing, skipped
}

// owner is the Debian package that installed path (symlinks followed:
// /bin/nc is netcat-openbsd's through /etc/alternatives), or "".
func owner(path string) string {
	candidates := []string{path}
	if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
		candidates = append(candidates, real)
	}
	for _, c := range slices.Clone(candidates) { // merged /usr: /bin/x is /usr/bin/x to dpkg, or the other way
		if rest, ok := strings.CutPrefix(c, "/usr"); ok {
			candidates = append(candidates, rest)
		} else {
			candidates = append(candidates, "/usr"+c)
		}
	}
	for _, c := range candidates {
		out, err := exec.Command("dpkg-query", "-S", c).Output()
		if err != nil {
			continue
		}
		// "pkg[:arch][, pkg2]: /path"; a diversion line starts "diversion by".
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if strings.HasPrefix(line, "diversion") {
				continue
			}
			pkgs, _, _ := strings.Cut(line, ": ")
			first, _, _ := strings.Cut(pkgs, ",")
			name, _, _ := strings.Cut(strings.TrimSpace(first), ":")
			return name
		}
	}
	return ""
}

// dependsOf is every package the listed ones pull in (Depends and
// Pre-Depends, transitively, of what is installed), the listed included.
func dependsOf(t *testing.T, pkgs map[string]bool) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	queue := make([]string, 0, len(pkgs))
	for p := range pkgs {
		queue = append(queue, p)
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		out, err := exec.Command("dpkg-query", "-W", "-f=${Depends}, ${Pre-Depends}", p).Output()
		if err != nil {
			continue // virtual, or not installed: nothing it pulls in is known
		}
		for _, dep := range strings.Split(string(out), ",") {
			for _, alt := range strings.Split(dep, "|") { // any alternative may be the one installed
				name := strings.Fields(strings.TrimSpace(alt) + " ")
				if len(name) > 0 {
					n, _, _ := strings.Cut(name[0], ":")
					queue = append(queue, n)
				}
			}
		}
	}
	return seen
}

func requireDpkg(t *testing.T) {
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("dpkg-query not found: the project is built on Debian (hack/install-deps.sh)")
		}
		t.Skip("not a Debian machine: no dpkg-query to ask which package a file is from")
	}
}

// TestEveryProgramComesFromAListedPackage: every program the project's
// code and tests name is installed by a package hack/install-deps.sh
// lists.
func TestEveryProgramComesFromAListedPackage(t *testing.T) {
	requireDpkg(t)
	repo := root(t)
	pkgs := listed(t, repo)
	pulled := dependsOf(t, pkgs)
	uses, missing, skipped := programsNamed(t, repo)
	for _, m := range missing {
		t.Errorf("%s runs %s, which this machine does not have: install its package through hack/install-deps.sh", m.where, m.path)
	}
	byPath := map[string][]string{}
	for _, u := range uses {
		byPath[u.path] = append(byPath[u.path], u.where)
	}
	// Positive control: the scan finds what the sandbox and the images
	// surely run, and their packages are read.
	for path, pkg := range map[string]string{"/usr/bin/iperf3": "iperf3", "/usr/bin/nsenter": "util-linux", "/bin/nc.openbsd": "netcat-openbsd"} {
		if _, ok := byPath[path]; !ok {
			t.Errorf("the scan did not find %s, which the project runs: it finds nothing", path)
		}
		if got := owner(path); got != pkg {
			t.Errorf("%s: owner %q, want %q", path, got, pkg)
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, path := range paths {
		where := byPath[path]
		pkg := owner(path)
		t.Logf("%-28s %-28s %s", path, pkg, where[0])
		switch {
		case pkg == "":
			t.Errorf("%s (named at %s) is from no Debian package: install it through hack/install-deps.sh, or name why not in notFromDebian",
				path, strings.Join(where, ", "))
		case !pkgs[pkg] && !pulled[pkg]: // pulled in: a versioned package behind a listed one's link (cc: gcc-12 by gcc)
			t.Errorf("%s (named at %s) is package %s, which hack/install-deps.sh does not list: add it to packages=( )",
				path, strings.Join(where, ", "), pkg)
		}
	}
	for name, why := range skipped {
		t.Logf("%s: not from Debian: %s", name, why)
	}
}

// TestImagesCopyOnlyListedFiles: every host file the test images copy
// (lab/images.HostSources) is from a listed package, and each shared
// library it needs from a listed package or one a listed package pulls in.
func TestImagesCopyOnlyListedFiles(t *testing.T) {
	requireDpkg(t)
	pkgs := listed(t, root(t))
	pulled := dependsOf(t, pkgs)
	sources := images.HostSources()
	if !slices.Contains(sources, "/bin/nc.openbsd") { // positive control: the file that once broke a fresh machine
		t.Fatalf("images.HostSources lists no /bin/nc.openbsd: %v", sources)
	}
	for _, src := range sources {
		pkg := owner(src)
		if pkg == "" || !pkgs[pkg] {
			t.Errorf("the test images copy %s, from package %q, which hack/install-deps.sh does not list: add it to packages=( )", src, pkg)
			continue
		}
		files, err := images.HostBinary(src, src)
		if err != nil {
			if strings.Contains(err.Error(), "not a dynamic executable") || strings.Contains(err.Error(), "exit status 1") {
				continue // static (busybox): no libraries
			}
			t.Fatal(err)
		}
		for _, f := range files[1:] {
			lib := owner(f.Source)
			t.Logf("%-22s %-50s %s", src, f.Source, lib)
			if lib == "" || !pulled[lib] {
				t.Errorf("%s needs %s, from package %q, which no package hack/install-deps.sh lists pulls in", src, f.Source, lib)
			}
		}
	}
}
