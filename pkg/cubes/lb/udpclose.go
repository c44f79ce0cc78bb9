package lb

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/netcube/netcube/pkg/model"
)

// udpLeft is a UDP backend that left a frontend.
type udpLeft struct {
	backend  netip.AddrPort
	revNATID uint32
}

// closeLeftUDPSockets closes, in every pod, the connected UDP sockets of
// backends that leave their frontend, so that long-lived UDP clients (DNS
// resolvers) reconnect to a live one at once; socket-LB translated them at
// connect() and no hook sees their datagrams again. The cube reports
// removals as they are written; a worker does the closing.
func closeLeftUDPSockets(ctx context.Context, dp sockDestroyer, cgroup string) func(model.Frontend, uint32, []model.Backend) {
	work := make(chan udpLeft, 1024)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case l := <-work:
				for _, ns := range podNetns(cgroup) {
					if err := dp.destroyUDPSockets(ns, l.backend, l.revNATID); err != nil {
						slog.Error("closing UDP sockets of a removed backend", "backend", l.backend, "netns", ns, "err", err)
					}
				}
			}
		}
	}()
	return func(fe model.Frontend, revNATID uint32, left []model.Backend) {
		if fe.Proto != model.UDP {
			return
		}
		for _, b := range left {
			select {
			case work <- udpLeft{netip.AddrPortFrom(b.Addr, b.Port), revNATID}:
			default:
				slog.Warn("too many removed UDP backends at once; their sockets stay connected", "backend", b)
			}
		}
	}
}

// podNetns lists the network namespaces of the processes in the pods'
// cgroup tree, one path per namespace.
func podNetns(cgroup string) []string {
	seen := map[uint64]bool{}
	var out []string
	_ = filepath.WalkDir(cgroup, func(dir string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(procs)) {
			if _, err := strconv.Atoi(f); err != nil {
				continue
			}
			path := "/proc/" + f + "/ns/net"
			var st syscall.Stat_t
			if syscall.Stat(path, &st) != nil || seen[st.Ino] {
				continue
			}
			seen[st.Ino] = true
			out = append(out, path)
		}
		return nil
	})
	return out
}
