// Package podnetns names the network namespaces of this node's pods by
// their cookie, which is all a socket hook knows of a pod (its socket has
// no address yet at connect): the namespaces are those named under
// /run/netns (where container runtimes' CNI setups and the sandbox keep
// them), and each one's addresses are read inside it.
package podnetns

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Dir is where named network namespaces are.
const Dir = "/run/netns"

// Index maps namespace cookies to the addresses in them, rescanning Dir
// at most every MinRescan when asked for a cookie it does not know.
type Index struct {
	Dir       string
	MinRescan time.Duration

	mu       sync.Mutex
	byCookie map[uint64][]netip.Addr
	scanned  time.Time
}

// New returns an index of the namespaces under Dir.
func New() *Index { return &Index{Dir: Dir, MinRescan: time.Second} }

// AddrOf returns the address of family (4 or 6) in the namespace with
// cookie.
func (x *Index) AddrOf(cookie uint64, family uint8) (netip.Addr, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	addrs, ok := x.byCookie[cookie]
	if !ok && time.Since(x.scanned) >= x.MinRescan {
		x.byCookie = scan(x.Dir)
		x.scanned = time.Now()
		addrs, ok = x.byCookie[cookie]
	}
	if !ok {
		return netip.Addr{}, false
	}
	for _, a := range addrs {
		if (family == 4) == a.Is4() {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// scan reads every namespace under dir: its cookie and its global
// unicast addresses.
func scan(dir string) map[uint64][]netip.Addr {
	out := map[uint64][]netip.Addr{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		cookie, addrs, err := read(filepath.Join(dir, e.Name()))
		if err == nil && len(addrs) > 0 {
			out[cookie] = addrs
		}
	}
	return out
}

// read enters the namespace at path on a thread of its own, and reads its
// cookie (SO_NETNS_COOKIE of a socket made there) and addresses.
func read(path string) (cookie uint64, addrs []netip.Addr, err error) {
	target, err := netns.GetFromPath(path)
	if err != nil {
		return 0, nil, err
	}
	defer target.Close()
	h, err := netlink.NewHandleAt(target)
	if err != nil {
		return 0, nil, err
	}
	defer h.Close()
	list, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return 0, nil, err
	}
	for _, a := range list {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap().IsGlobalUnicast() {
			addrs = append(addrs, ip.Unmap())
		}
	}
	cookie, err = cookieOf(target)
	return cookie, addrs, err
}

// cookieOf makes a socket in ns (its thread switched there and back,
// locked meanwhile) and asks its namespace cookie.
func cookieOf(ns netns.NsHandle) (uint64, error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return 0, err
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		runtime.UnlockOSThread()
		return 0, err
	}
	fd, sockErr := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err := netns.Set(orig); err != nil {
		// The thread is stuck in another namespace: never unlock it, so
		// that it dies with this goroutine instead of serving others.
		if sockErr == nil {
			unix.Close(fd)
		}
		return 0, errors.Join(errors.New("return to the agent's network namespace"), err)
	}
	runtime.UnlockOSThread()
	if sockErr != nil {
		return 0, sockErr
	}
	defer unix.Close(fd)
	v, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	return v, err
}
