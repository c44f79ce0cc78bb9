package datapath_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/cgroup"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// The socket-LB programs cannot run under BPF_PROG_RUN, so these tests use
// real sockets: a child process, placed in a test cgroup (never the root
// cgroup) and in a network namespace of its own, connects to Service
// addresses; its backends listen on its loopback.

const sockChildEnv = "NETCUBE_SOCK_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(sockChildEnv); mode != "" {
		sockChild(mode, os.Args[len(os.Args)-1])
		return
	}
	os.Exit(m.Run())
}

// sockResult is what the child saw.
type sockResult struct {
	Peer  string // getpeername (TCP, connected UDP) or recvfrom source (unconnected UDP)
	Reply string // what the backend answered
	Err   string
	Errno int
}

// Backends listen in the child's own network namespace, where nothing else
// exists: if socket-LB did not translate, a Service address is unreachable
// there instead of leaking onto a real network.
var (
	backend4 = netip.MustParseAddrPort("127.0.0.1:18080")
	backend6 = netip.MustParseAddrPort("[::1]:18080")
)

func sockChild(mode, target string) {
	var r sockResult
	defer func() { _ = json.NewEncoder(os.Stdout).Encode(r) }()
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		r.Err = fmt.Sprintf("lo up: %v %s", err, out)
		return
	}
	for _, b := range []struct {
		addr netip.AddrPort
		name string
	}{{backend4, "backend-v4"}, {backend6, "backend-v6"}} {
		if err := serve(b.addr, b.name); err != nil {
			r.Err = err.Error()
			return
		}
	}
	fail := func(err error) {
		r.Err = err.Error()
		var errno syscall.Errno
		if errors.As(err, &errno) {
			r.Errno = int(errno)
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	switch mode {
	case "tcp", "udp-connected":
		network := strings.TrimSuffix(mode, "-connected")
		c, err := net.DialTimeout(network, target, 3*time.Second)
		if err != nil {
			fail(err)
			return
		}
		defer c.Close()
		_ = c.SetDeadline(deadline)
		r.Peer = c.RemoteAddr().String() // net fills this in with getpeername()
		if network == "udp" {
			if _, err := c.Write([]byte("hello")); err != nil {
				fail(err)
				return
			}
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			fail(err)
			return
		}
		r.Reply = strings.TrimSpace(line)
	case "udp-unconnected":
		pc, err := net.ListenPacket("udp", ":0")
		if err != nil {
			fail(err)
			return
		}
		defer pc.Close()
		_ = pc.SetDeadline(deadline)
		dst, _ := net.ResolveUDPAddr("udp", target)
		if _, err := pc.WriteTo([]byte("hello"), dst); err != nil {
			fail(err)
			return
		}
		buf := make([]byte, 100)
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			fail(err)
			return
		}
		r.Peer, r.Reply = from.String(), strings.TrimSpace(string(buf[:n]))
	}
}

// serve starts a TCP and a UDP server on addr answering with name.
func serve(addr netip.AddrPort, name string) error {
	l, err := net.Listen("tcp", addr.String())
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, name)
			c.Close()
		}
	}()
	pc, err := net.ListenPacket("udp", addr.String())
	if err != nil {
		return err
	}
	go func() {
		buf := make([]byte, 100)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(name+"\n"), from)
		}
	}()
	return nil
}

// attachSockLB loads the datapath with pins in a private directory and
// attaches socket-LB to a fresh cgroup; both are removed when the test ends.
func attachSockLB(t *testing.T) (*lb.Tables, *os.File) {
	t.Helper()
	_, tables, cg := attachSockLBDatapath(t)
	return tables, cg
}

// attachSockLBDatapath is attachSockLB, with the datapath.
func attachSockLBDatapath(t *testing.T) (*datapath.Datapath, *lb.Tables, *os.File) {
	t.Helper()
	cg, pins := cgroupAndPins(t, "netcube-test-sock-")
	dp, err := loadTrusting(datapath.Config{PinDir: pins})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	if err := dp.AttachCgroup(cg); err != nil {
		t.Fatal(err)
	}
	dir, err := os.Open(cg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	return dp, lb.New(dp.Maps()), dir
}

// cgroupAndPins creates a fresh cgroup (never the root cgroup) and names a
// private pin directory; both are removed when the test ends.
func cgroupAndPins(t *testing.T, prefix string) (cg, pins string) {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.EnsureBPFFS(t)
	root, err := cgroup.Root()
	if err != nil {
		t.Fatal(err)
	}
	cg = filepath.Join(root, testenv.Name(prefix))
	pins = filepath.Join(datapath.BPFFS, testenv.Name(prefix))
	t.Cleanup(func() {
		if err := datapath.Unpin(pins); err != nil {
			t.Error(err)
		}
		if err := cgroup.Remove(root, cg); err != nil {
			t.Error(err)
		}
	})
	if err := cgroup.Create(cg); err != nil {
		t.Fatal(err)
	}
	return cg, pins
}

// inCgroup runs the child in the cgroup and returns what it saw.
func inCgroup(t *testing.T, cg *os.File, mode, target string) sockResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", target)
	cmd.Env = append(os.Environ(), sockChildEnv+"="+mode)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		UseCgroupFD: true, CgroupFD: int(cg.Fd()),
		Cloneflags: syscall.CLONE_NEWNET, // private loopback-only network
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child %s %s: %v", mode, target, err)
	}
	var r sockResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	return r
}

func TestSocketLB(t *testing.T) {
	cube, cg := attachSockLB(t)
	vip4 := netip.MustParseAddr("10.96.0.10")
	vip6 := netip.MustParseAddr("fd00:10:96::10")
	upsert := func(vip netip.Addr, port uint16, p model.Proto, b netip.AddrPort) {
		bs := []model.Backend{{Addr: b.Addr(), Port: b.Port()}}
		if err := cube.Upsert(model.Frontend{Addr: vip, Port: port, Proto: p}, bs); err != nil {
			t.Fatal(err)
		}
	}
	upsert(vip4, 80, model.TCP, backend4)
	upsert(vip4, 53, model.UDP, backend4)
	upsert(vip6, 80, model.TCP, backend6)
	upsert(vip6, 53, model.UDP, backend6)
	for _, p := range []model.Proto{model.TCP, model.UDP} {
		if err := cube.Upsert(model.Frontend{Addr: vip4, Port: 9, Proto: p}, nil); err != nil {
			t.Fatal(err)
		}
	}

	cases := []struct {
		mode, target string
		wantReply    string
		wantErrno    syscall.Errno
	}{
		{"tcp", "10.96.0.10:80", "backend-v4", 0},
		{"tcp", "[fd00:10:96::10]:80", "backend-v6", 0},
		{"tcp", "[::ffff:10.96.0.10]:80", "backend-v4", 0}, // IPv4-mapped on an IPv6 socket
		{"udp-connected", "10.96.0.10:53", "backend-v4", 0},
		{"udp-connected", "[fd00:10:96::10]:53", "backend-v6", 0},
		{"udp-unconnected", "10.96.0.10:53", "backend-v4", 0},
		{"udp-unconnected", "[fd00:10:96::10]:53", "backend-v6", 0},
		{"tcp", "10.96.0.10:9", "", syscall.ECONNREFUSED},
		{"udp-connected", "10.96.0.10:9", "", syscall.ECONNREFUSED},
		{"udp-unconnected", "10.96.0.10:9", "", syscall.ECONNREFUSED},
	}
	for _, c := range cases {
		t.Run(c.mode+" "+c.target, func(t *testing.T) {
			r := inCgroup(t, cg, c.mode, c.target)
			if c.wantErrno != 0 {
				if syscall.Errno(r.Errno) != c.wantErrno {
					t.Fatalf("got %+v, want error %v", r, c.wantErrno)
				}
				return
			}
			if r.Err != "" || r.Reply != c.wantReply {
				t.Fatalf("got %+v, want reply %q", r, c.wantReply)
			}
			// The application sees the Service address, never the backend's.
			want := netip.MustParseAddrPort(c.target)
			got, err := netip.ParseAddrPort(r.Peer)
			if err != nil || got.Addr().Unmap() != want.Addr().Unmap() || got.Port() != want.Port() {
				t.Fatalf("peer %q, want %s", r.Peer, c.target)
			}
		})
	}
}

// TestSocketReleaseForgetsItsTranslation: a socket's reverse translation
// (sock_revnat) leaves with the socket, TCP and UDP, connected or not,
// IPv4, IPv6 and IPv4-mapped, and so does an unconnected UDP socket's
// backend (sock_udp_backend); the positive control: the reply came back
// from the Service address, so the entry was there while it was open.
func TestSocketReleaseForgetsItsTranslation(t *testing.T) {
	dp, cube, cg := attachSockLBDatapath(t)
	vip4 := netip.MustParseAddr("10.96.0.10")
	vip6 := netip.MustParseAddr("fd00:10:96::10")
	for _, fe := range []struct {
		vip  netip.Addr
		port uint16
		p    model.Proto
		b    netip.AddrPort
	}{{vip4, 80, model.TCP, backend4}, {vip4, 53, model.UDP, backend4}, {vip6, 80, model.TCP, backend6}} {
		if err := cube.Upsert(model.Frontend{Addr: fe.vip, Port: fe.port, Proto: fe.p}, []model.Backend{{Addr: fe.b.Addr(), Port: fe.b.Port()}}); err != nil {
			t.Fatal(err)
		}
	}
	entries := func() int {
		n := 0
		var k, v []byte
		for it := dp.Maps().Map("sock_revnat").Iterate(); it.Next(&k, &v); {
			n++
		}
		return n
	}
	udpEntries := func() int {
		n := 0
		var k, v []byte
		for it := dp.Maps().Map("sock_udp_backend").Iterate(); it.Next(&k, &v); {
			n++
		}
		return n
	}
	for _, c := range []struct{ mode, target, reply string }{
		{"tcp", "10.96.0.10:80", "backend-v4"},
		{"tcp", "[fd00:10:96::10]:80", "backend-v6"},
		{"tcp", "[::ffff:10.96.0.10]:80", "backend-v4"},
		{"udp-connected", "10.96.0.10:53", "backend-v4"},
		{"udp-unconnected", "10.96.0.10:53", "backend-v4"},
	} {
		// The reply's source is the Service (and getpeername says so):
		// the entry was there while the socket was open.
		r := inCgroup(t, cg, c.mode, c.target)
		if r.Err != "" || r.Reply != c.reply {
			t.Fatalf("%s %s: %+v", c.mode, c.target, r)
		}
		if got, err := netip.ParseAddrPort(r.Peer); err != nil || got.Addr().Unmap() != netip.MustParseAddrPort(c.target).Addr().Unmap() {
			t.Fatalf("%s %s: peer %q: not reverse-translated while the socket was open", c.mode, c.target, r.Peer)
		}
		if n := entries(); n != 0 {
			t.Errorf("%s %s: %d sock_revnat entries once its socket closed, want none", c.mode, c.target, n)
		}
		if n := udpEntries(); n != 0 {
			t.Errorf("%s %s: %d sock_udp_backend entries once its socket closed, want none", c.mode, c.target, n)
		}
	}
}
