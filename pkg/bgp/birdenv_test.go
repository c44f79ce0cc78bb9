package bgp

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/netcube/netcube/internal/testenv"
)

// birdEnv is a BIRD 2 router in a network namespace of its own, on the
// other end of a veth pair from the host, where the speaker under test
// runs.
type birdEnv struct {
	t              *testing.T
	ns             string
	hostIf, nsIf   string
	hostV4, nsV4   netip.Addr
	hostV6, nsV6   netip.Addr
	dir, sock, log string
	cmd            *exec.Cmd
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newBirdEnv makes the namespace and the link. Its addresses are a /30 of
// 198.18.0.0/16 (RFC 2544's benchmarking range, not TEST-NET-1: machines
// here have their own uplink in 192.0.2.0/24) and 2001:db8:PID::/64, both
// picked by the process id so that test processes running at once do not
// collide; a subnet the host already routes is refused, not shadowed.
func newBirdEnv(t *testing.T) *birdEnv { return newBirdEnvSlot(t, 0) }

// newBirdEnvSlot is newBirdEnv for a test that needs more than one router:
// slot 1 is a second namespace and link, in 198.19.0.0/16 (the other half
// of RFC 2544's /15) and 2001:db8:PID:1::/64.
func newBirdEnvSlot(t *testing.T, slot int) *birdEnv {
	testenv.RequireRoot(t)
	for _, p := range []string{"bird", "birdc", "ip", "nft"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s not found: run hack/install-deps.sh", p)
		}
	}
	if slot != 0 && slot != 1 {
		t.Fatalf("bird env slot %d: only 0 and 1 exist", slot)
	}
	pid := os.Getpid()
	suffix := []string{"", "f"}[slot]
	e := &birdEnv{
		t:      t,
		ns:     testenv.Name("ncbgp" + suffix),
		hostIf: testenv.Name("ncbh" + suffix),
		nsIf:   testenv.Name("ncbn" + suffix),
		hostV4: netip.AddrFrom4([4]byte{198, byte(18 + slot), byte(pid % 16384 / 64), byte(4*(pid%64) + 1)}),
		nsV4:   netip.AddrFrom4([4]byte{198, byte(18 + slot), byte(pid % 16384 / 64), byte(4*(pid%64) + 2)}),
		hostV6: netip.MustParseAddr(fmt.Sprintf("2001:db8:%x:%x::1", pid%0xffff, slot)),
		nsV6:   netip.MustParseAddr(fmt.Sprintf("2001:db8:%x:%x::2", pid%0xffff, slot)),
		dir:    t.TempDir(),
	}
	for _, a := range []netip.Addr{e.hostV4, e.nsV4} {
		if out := run(t, "ip", "route", "get", a.String()); !strings.Contains(out, " via ") {
			t.Fatalf("%s is on a network this host already has (%s): pick another test subnet", a, strings.TrimSpace(out))
		}
	}
	e.sock = filepath.Join(e.dir, "bird.ctl")
	e.log = filepath.Join(e.dir, "bird.log")
	t.Cleanup(e.cleanup)
	run(t, "ip", "netns", "add", e.ns)
	run(t, "ip", "link", "add", e.hostIf, "type", "veth", "peer", "name", e.nsIf, "netns", e.ns)
	run(t, "ip", "addr", "add", e.hostV4.String()+"/30", "dev", e.hostIf)
	run(t, "ip", "addr", "add", e.hostV6.String()+"/64", "dev", e.hostIf, "nodad")
	run(t, "ip", "link", "set", e.hostIf, "up")
	e.inNS("ip", "link", "set", "lo", "up")
	e.inNS("ip", "addr", "add", e.nsV4.String()+"/30", "dev", e.nsIf)
	e.inNS("ip", "addr", "add", e.nsV6.String()+"/64", "dev", e.nsIf, "nodad")
	e.inNS("ip", "link", "set", e.nsIf, "up")
	return e
}

func (e *birdEnv) inNS(args ...string) string {
	e.t.Helper()
	return run(e.t, "ip", append([]string{"netns", "exec", e.ns}, args...)...)
}

// cleanup runs even when the test failed half-way: every step is tried.
func (e *birdEnv) cleanup() {
	if e.t.Failed() && e.cmd != nil {
		for _, q := range [][]string{{"show", "protocols", "all", "node"}, {"show", "route", "all"}} {
			out, _ := exec.Command("birdc", append([]string{"-s", e.sock}, q...)...).CombinedOutput()
			e.t.Logf("birdc %s:\n%s", strings.Join(q, " "), out)
		}
	}
	if e.cmd != nil && e.cmd.Process != nil {
		_ = e.cmd.Process.Kill()
		_ = e.cmd.Wait()
	}
	_ = exec.Command("ip", "link", "del", e.hostIf).Run()
	_ = exec.Command("ip", "netns", "del", e.ns).Run()
	if e.t.Failed() {
		if b, err := os.ReadFile(e.log); err == nil {
			e.t.Logf("bird.log:\n%s", b)
		}
	}
}

// birdConf is BIRD's side of the session: it peers passively with the
// host (the speaker connects out and does not listen), exports one static
// route to test that the speaker imports nothing, and accepts all it gets.
type birdConf struct {
	RouterID, Local, Neighbor netip.Addr
	LocalAS, NeighborAS       uint32
	Password                  string
	GR                        bool
}

var birdTmpl = template.Must(template.New("bird").Parse(`
router id {{.RouterID}};
log "{{.Log}}" all;
debug protocols { states, events };
protocol device { scan time 1; }
protocol static up4 {
	ipv4;
	route 198.51.100.0/24 unreachable;
}
protocol bgp node {
	local {{.Local}} as {{.LocalAS}};
	neighbor {{.Neighbor}} as {{.NeighborAS}};
	direct;
	passive on;
	hold time 3;
	keepalive time 1;
	{{if .Password}}password "{{.Password}}";{{end}}
	{{if .GR}}graceful restart on; graceful restart time 30;{{else}}graceful restart off;{{end}}
	ipv4 { import all; export where proto = "up4"; next hop self; gateway direct; };
	ipv6 { import all; export none; gateway direct; };
}
`))

func (e *birdEnv) writeConf(c birdConf) string {
	e.t.Helper()
	var b bytes.Buffer
	if err := birdTmpl.Execute(&b, struct {
		birdConf
		Log string
	}{c, e.log}); err != nil {
		e.t.Fatal(err)
	}
	f := filepath.Join(e.dir, "bird.conf")
	if err := os.WriteFile(f, b.Bytes(), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return f
}

// defaultConf: eBGP, AS 65001 (BIRD) to 65000 (the speaker).
func (e *birdEnv) defaultConf() birdConf {
	return birdConf{RouterID: e.nsV4, Local: e.nsV4, Neighbor: e.hostV4, LocalAS: 65001, NeighborAS: 65000, Password: "md5-secret", GR: true}
}

func (e *birdEnv) start(c birdConf) {
	e.t.Helper()
	conf := e.writeConf(c)
	e.cmd = exec.Command("ip", "netns", "exec", e.ns, "bird", "-f", "-c", conf, "-s", e.sock)
	e.cmd.Stdout, e.cmd.Stderr = testenv.LogWriter(e.t), testenv.LogWriter(e.t)
	if err := e.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	testenv.WaitFor(e.t, 10*time.Second, "bird answering on its socket", func() bool {
		return exec.Command("birdc", "-s", e.sock, "show", "status").Run() == nil
	})
}

// reconfigure loads c into the running BIRD (a changed protocol restarts).
func (e *birdEnv) reconfigure(c birdConf) {
	e.t.Helper()
	conf := e.writeConf(c)
	out := e.birdc("configure", `"`+conf+`"`)
	if !strings.Contains(out, "Reconfigured") && !strings.Contains(out, "Reconfiguration in progress") {
		e.t.Fatalf("birdc configure: %s", out)
	}
}

func (e *birdEnv) birdc(args ...string) string {
	e.t.Helper()
	return run(e.t, "birdc", append([]string{"-s", e.sock}, args...)...)
}

// protoState is BIRD's "BGP state:" of protocol node (Established, Idle,
// Active, Connect, ...).
func (e *birdEnv) protoState() string {
	e.t.Helper()
	for _, l := range strings.Split(e.birdc("show", "protocols", "all", "node"), "\n") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(l), "BGP state:"); ok {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// birdRoute is one route of BIRD's table as `show route all` prints it.
type birdRoute struct {
	Prefix    string
	NextHop   string
	Community string
	LocalPref string
	Text      string
}

// routes is what BIRD learned from the speaker (protocol node), by prefix.
func (e *birdEnv) routes() map[string]birdRoute {
	e.t.Helper()
	return parseBirdRoutes(e.birdc("show", "route", "all", "protocol", "node"))
}

// parseBirdRoutes reads `show route all`: a route starts on a line with
// the prefix in the first column (continuations of a prefix start with
// blanks and are not used here: one path each), its attributes follow
// indented.
func parseBirdRoutes(out string) map[string]birdRoute {
	rs := map[string]birdRoute{}
	var cur *birdRoute
	flush := func() {
		if cur != nil {
			rs[cur.Prefix] = *cur
		}
		cur = nil
	}
	for _, l := range strings.Split(out, "\n") {
		if l == "" || strings.HasPrefix(l, "Table ") || strings.HasPrefix(l, "BIRD ") {
			continue
		}
		if l[0] != ' ' && l[0] != '\t' {
			flush()
			f := strings.Fields(l)
			cur = &birdRoute{Prefix: f[0]}
		}
		if cur == nil {
			continue
		}
		cur.Text += l + "\n"
		t := strings.TrimSpace(l)
		if v, ok := strings.CutPrefix(t, "BGP.next_hop:"); ok {
			cur.NextHop = strings.Fields(v)[0]
		}
		if v, ok := strings.CutPrefix(t, "BGP.community:"); ok {
			cur.Community = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(t, "BGP.local_pref:"); ok {
			cur.LocalPref = strings.TrimSpace(v)
		}
	}
	flush()
	return rs
}
