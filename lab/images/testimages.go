package images

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// The upstream e2e suite's test images are built here from local parts,
// since nothing can be pulled: agnhost from its Go package (built by
// hack/build-e2e.sh), busybox from Debian's static busybox, and the few
// tools agnhost's image adds to its base (curl, netcat) copied from this
// machine with their shared libraries. They are tagged with the exact
// names e2e.test asks for (`e2e.test --list-images`), so pods find them
// already imported.

// busyboxBin is Debian's static busybox (package busybox-static).
const busyboxBin = "/bin/busybox"

// The users and groups the upstream images define (agnhost's Dockerfile
// adds user-defined-in-image; some tests run as it).
const (
	passwd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n" +
		"user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n"
	group = "root:x:0:\nnobody:x:65534:\nuser-defined-in-image:x:1000:\n" +
		"group-defined-in-image:x:50000:user-defined-in-image\n"
)

// busyboxBase is a busybox userland: /bin/busybox and a link for every
// applet at the path busybox lists for it, /etc/passwd and /etc/group, and
// the directories programs expect (/tmp writable by all).
func busyboxBase() ([]File, error) {
	out, err := exec.Command(busyboxBin, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-full: %w (install busybox-static: make deps)", busyboxBin, err)
	}
	files := []File{
		{Source: busyboxBin, Path: "/bin/busybox", Mode: 0o755},
		{Content: []byte(passwd), Path: "/etc/passwd", Mode: 0o644},
		{Content: []byte(group), Path: "/etc/group", Mode: 0o644},
		{Content: []byte("hosts: files dns\n"), Path: "/etc/nsswitch.conf", Mode: 0o644},
		{Path: "/tmp", Mode: 0o1777},
		{Path: "/root", Mode: 0o700},
	}
	for _, applet := range strings.Fields(string(out)) {
		p := "/" + applet
		if p == "/bin/busybox" {
			continue
		}
		files = append(files, File{Link: "/bin/busybox", Path: p})
	}
	return files, nil
}

// HostBinary is a dynamically linked program of this machine at inImage,
// with the shared libraries and the loader it needs (from ldd) at their
// paths, so it runs in an image with no libc of its own.
func HostBinary(source, inImage string) ([]File, error) {
	files := []File{{Source: source, Path: inImage, Mode: 0o755}}
	out, err := exec.Command("ldd", source).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", source, err)
	}
	s := bufio.NewScanner(bytes.NewReader(out))
	for s.Scan() {
		// "libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)" or
		// "/lib64/ld-linux-x86-64.so.2 (0x...)"; vdso has no file.
		fields := strings.Fields(s.Text())
		lib := ""
		switch {
		case len(fields) >= 3 && fields[1] == "=>":
			lib = fields[2]
		case len(fields) == 2 && path.IsAbs(fields[0]):
			lib = fields[0]
		}
		if lib == "" || !path.IsAbs(lib) {
			continue
		}
		real, err := filepath.EvalSymlinks(lib)
		if err != nil {
			return nil, fmt.Errorf("%s needs %s: %w", source, lib, err)
		}
		files = append(files, File{Source: real, Path: lib, Mode: 0o755})
	}
	return files, nil
}

// hostTools are the programs of this machine agnhost's image gets (a
// shell, curl, wget, dig, getent and netcat as nc): what agnhost's image
// installs on top of its base, and what the suite's commands in pods call.
var hostTools = []struct{ source, path string }{
	// Debian's static busybox shell runs its own applets before
	// any program on PATH (nc would be busybox's, without -v):
	// the shell is dash, as upstream's is a plain one.
	{"/bin/dash", "/bin/sh"},
	{"/usr/bin/curl", "/usr/bin/curl"},
	{"/usr/bin/dig", "/usr/bin/dig"},       // the suite's DNS probes,
	{"/usr/bin/getent", "/usr/bin/getent"}, // and its /etc/hosts ones (glibc's resolver)
	// Debian's static busybox wget crashes (SIGSEGV, even to
	// 127.0.0.1); the suite fetches with wget everywhere.
	{"/usr/bin/wget", "/usr/bin/wget"},
	{"/bin/nc.openbsd", "/usr/bin/nc"},
	// Upstream's base (debian-base) has bash, and the ClusterNetworkPolicy
	// suite's pods run every server with /bin/bash -c.
	{"/bin/bash", "/bin/bash"},
}

// HostSources are the files of this machine the test images copy (their
// shared libraries aside, which HostBinary finds): each must come from a
// package hack/install-deps.sh installs (internal/hostdeps checks).
func HostSources() []string {
	out := []string{busyboxBin}
	for _, t := range hostTools {
		out = append(out, t.source)
	}
	return out
}

// withHostTools adds hostTools to files, with their shared libraries.
func withHostTools(files []File) ([]File, error) {
	for _, t := range hostTools {
		more, err := HostBinary(t.source, t.path)
		if err != nil {
			return nil, err
		}
		files = append(files, more...)
	}
	return dedupe(files), nil
}

// dedupe keeps the last entry for each path (a host tool replaces the
// busybox applet of the same name; shared libraries appear once).
func dedupe(files []File) []File {
	last := map[string]int{}
	for i, f := range files {
		last[f.Path] = i
	}
	var out []File
	for i, f := range files {
		if last[f.Path] == i {
			out = append(out, f)
		}
	}
	return out
}

// BusyBox is the suite's busybox image, under refs.
func BusyBox(refs []string) (Spec, error) {
	if len(refs) == 0 {
		return Spec{}, fmt.Errorf("busybox: no image name")
	}
	files, err := busyboxBase()
	if err != nil {
		return Spec{}, err
	}
	return Spec{Ref: refs[0], Aliases: refs[1:], Files: files, Cmd: []string{"sh"},
		Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}}, nil
}

// GlibcDNSTesting is the suite's glibc resolver image (upstream: Debian
// with dnsutils, its DNS tests' second querier): glibc's dig over the
// busybox userland.
func GlibcDNSTesting(refs []string) (Spec, error) {
	if len(refs) == 0 {
		return Spec{}, fmt.Errorf("glibc-dns-testing: no image name")
	}
	files, err := busyboxBase()
	if err != nil {
		return Spec{}, err
	}
	if files, err = withHostTools(files); err != nil {
		return Spec{}, err
	}
	return Spec{Ref: refs[0], Aliases: refs[1:], Files: files, Cmd: []string{"sh"},
		Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}}, nil
}

// Agnhost is the suite's agnhost image, under refs: the agnhost binary
// (static, from hack/build-e2e.sh) as /agnhost and /agnhost-2 and CoreDNS
// as /coredns (both, and the porter's certificate, from agnhostBin's
// directory) over the busybox userland and the host tools; its default command serves nothing
// (pause), as upstream's.
func Agnhost(agnhostBin string, refs []string) (Spec, error) {
	if len(refs) == 0 {
		return Spec{}, fmt.Errorf("agnhost: no image name")
	}
	if _, err := os.Stat(agnhostBin); err != nil {
		return Spec{}, fmt.Errorf("agnhost: %w (hack/build-e2e.sh builds it)", err)
	}
	files, err := busyboxBase()
	if err != nil {
		return Spec{}, err
	}
	if files, err = withHostTools(files); err != nil {
		return Spec{}, err
	}
	dir := filepath.Dir(agnhostBin) // the porter's TLS certificate and CoreDNS, beside it (hack/build-e2e.sh)
	files = append(files,
		// Upstream's image carries CoreDNS: the DNS tests run their
		// own servers with it.
		File{Source: filepath.Join(dir, "coredns"), Path: "/coredns", Mode: 0o755},
		File{Source: filepath.Join(dir, "localhost.crt"), Path: "/localhost.crt", Mode: 0o644},
		File{Source: filepath.Join(dir, "localhost.key"), Path: "/localhost.key", Mode: 0o644},
		File{Source: agnhostBin, Path: "/agnhost", Mode: 0o755},
		File{Link: "agnhost", Path: "/agnhost-2"},
		File{Path: "/uploads"},
	)
	return Spec{Ref: refs[0], Aliases: refs[1:], Files: files,
		Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"},
		Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}}, nil
}

// RegressionIssue74839 is the suite's raw-socket server of the invalid
// conntrack state test (upstream: the binary over debian-base; it needs
// nothing of it): the static binary, from hack/build-e2e.sh.
func RegressionIssue74839(bin string, refs []string) (Spec, error) {
	if len(refs) == 0 {
		return Spec{}, fmt.Errorf("regression-issue-74839: no image name")
	}
	if _, err := os.Stat(bin); err != nil {
		return Spec{}, fmt.Errorf("regression-issue-74839: %w (hack/build-e2e.sh builds it)", err)
	}
	return Spec{Ref: refs[0], Aliases: refs[1:],
		Files:      []File{{Source: bin, Path: "/regression-issue-74839", Mode: 0o755}},
		Entrypoint: []string{"/regression-issue-74839"}}, nil
}

// Buildable are the images of the suite built here, by repository; the
// suite's other images (nginx, httpd, perl, ...) cannot be, and tests that
// use them fail to start their pods (the conformance report says which).
var Buildable = []string{
	"registry.k8s.io/e2e-test-images/agnhost",
	"registry.k8s.io/e2e-test-images/busybox",
	"registry.k8s.io/e2e-test-images/glibc-dns-testing",
	"registry.k8s.io/e2e-test-images/regression-issue-74839",
	"registry.k8s.io/pause",
}

// RefsByRepository groups image references (`e2e.test --list-images`) by
// repository, keeping only the buildable ones.
func RefsByRepository(refs []string) map[string][]string {
	out := map[string][]string{}
	for _, ref := range refs {
		ref = strings.TrimSpace(ref)
		i := strings.LastIndexByte(ref, ':')
		if i < 0 {
			continue
		}
		for _, repo := range Buildable {
			if ref[:i] == repo {
				out[repo] = append(out[repo], ref)
			}
		}
	}
	return out
}

// CoreDNSRef names the cluster DNS image (built from CoreDNS's Go module
// by hack/build-e2e.sh; not one the suite lists).
const CoreDNSRef = "registry.k8s.io/coredns/coredns:v1.15.0"

// CoreDNS is the cluster DNS server's image: the static coredns binary.
func CoreDNS(bin string) Spec {
	return Spec{Ref: CoreDNSRef,
		Files:      []File{{Source: bin, Path: "/coredns", Mode: 0o755}},
		Entrypoint: []string{"/coredns"}}
}

// CNPSuiteAgnhostRef is the agnhost image the pods of the upstream
// ClusterNetworkPolicy conformance suite name (sigs.k8s.io/network-policy-api's
// conformance/base manifests); the sandbox tags its agnhost so too, as
// e2e.test lists no such version (lab/cnp's TestSuiteImagesAreImported
// holds this to the suite's manifests). The commands the suite runs of it
// (connect, serve-hostname, netexec, porter, pause) take the same flags
// in the version built here.
const CNPSuiteAgnhostRef = "registry.k8s.io/e2e-test-images/agnhost:2.45"

// CyclonusWorkerRef is the image cyclonus's probing pods run
// (netpol.WorkerImage): they serve with agnhost and probe with the worker.
const CyclonusWorkerRef = "docker.io/mfenwick100/cyclonus-worker:latest"

// CyclonusWorker is cyclonus's worker image as upstream builds it: the
// agnhost image (agnhost, a Spec from Agnhost) with the worker binary
// (static, from `make images`) as /worker, its entrypoint.
func CyclonusWorker(agnhost Spec, workerBin string) (Spec, error) {
	if _, err := os.Stat(workerBin); err != nil {
		return Spec{}, fmt.Errorf("cyclonus worker: %w (make images builds it)", err)
	}
	files := append(slices.Clone(agnhost.Files), File{Source: workerBin, Path: "/worker", Mode: 0o755})
	return Spec{Ref: CyclonusWorkerRef, Files: files, Entrypoint: []string{"/worker"}, Env: agnhost.Env}, nil
}
