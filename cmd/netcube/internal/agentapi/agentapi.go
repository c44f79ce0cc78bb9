// Package agentapi is how the netcube CLI reaches a node: the agent's
// local API (a unix socket) and, for what must work while the agent is
// down, the datapath's pinned maps.
package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// Defaults: where the agent serves its API and pins its maps (its
// --api-socket and --bpf-root).
const (
	DefaultSocket  = "/run/netcube/agent.sock"
	DefaultBPFRoot = "/sys/fs/bpf/netcube"
)

// The environment that sets both for every verb at once: what
// `netcube-lab sandbox env NODE` prints for a sandbox node (whose agent
// pins and listens under the sandbox's own paths), and what `netcube-lab
// sandbox exec NODE -- ...` sets.
const (
	EnvSocket  = "NETCUBE_SOCKET"
	EnvBPFRoot = "NETCUBE_BPF_ROOT"
)

// SocketDefault is --socket's default: $NETCUBE_SOCKET, else DefaultSocket.
func SocketDefault() string { return envOr(EnvSocket, DefaultSocket) }

// BPFRootDefault is --bpf-root's default: $NETCUBE_BPF_ROOT, else
// DefaultBPFRoot.
func BPFRootDefault() string { return envOr(EnvBPFRoot, DefaultBPFRoot) }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Node is where a verb finds the node.
type Node struct {
	Socket, BPFRoot string
}

// Flags binds --socket and --bpf-root.
func (n *Node) Flags(fs *flag.FlagSet) {
	fs.StringVar(&n.Socket, "socket", SocketDefault(), "the agent's local API socket (its --api-socket; default from $"+EnvSocket+")")
	fs.StringVar(&n.BPFRoot, "bpf-root", BPFRootDefault(), "where the agent pins the datapath's maps (its --bpf-root; default from $"+EnvBPFRoot+")")
}

// sandboxHint is where a sandbox's nodes are, for a user who ran the demo.
const sandboxHint = "a sandbox node's paths: eval \"$(netcube-lab sandbox env NODE)\", or netcube-lab sandbox exec NODE -- netcube ..."

// ErrNoAgent: no agent answers on the socket.
var ErrNoAgent = errors.New("no agent answers")

// Get sends GET path to the agent; the caller closes the body.
func (n Node) Get(ctx context.Context, path string) (*http.Response, error) {
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", n.Socket)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, socketError(n.Socket, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("agent: GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(b)))
	}
	return resp, nil
}

// GetJSON reads the agent's answer to GET path into v, waiting at most
// a few seconds.
func (n Node) GetJSON(path string, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := n.Get(ctx, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// socketError says why no agent answered on socket: nothing there,
// nothing listening, or not allowed; each wraps ErrNoAgent.
func socketError(socket string, err error) error {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: no socket at %s: is the netcube agent running on this node, with --api-socket %s? (--socket or $%s; %s)",
			ErrNoAgent, socket, socket, EnvSocket, sandboxHint)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w: nothing listens on %s: the agent that made it has stopped (is it restarting? its logs say why)", ErrNoAgent, socket)
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("%w: permission denied on %s: the agent's socket is root's (run as root: sudo)", ErrNoAgent, socket)
	}
	return err
}

// Maps opens the datapath's pinned maps, read-only.
func (n Node) Maps() (*cube.Maps, func(), error) {
	if _, err := os.Stat(n.BPFRoot); err != nil {
		return nil, nil, pinError(n.BPFRoot, err)
	}
	maps, closeAll, err := datapath.OpenPinned(n.BPFRoot)
	if err != nil {
		return nil, nil, pinError(n.BPFRoot, err)
	}
	return maps, closeAll, nil
}

// pinError says why the datapath at root cannot be read: nothing pinned
// there (and where pins are, if under it: a sandbox's root holds a
// directory per node), not allowed, or pinned by another version.
func pinError(root string, err error) error {
	var layout *datapath.PinLayoutError
	switch {
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("permission denied reading the datapath pinned at %s: its maps are root's (run as root: sudo): %w", root, err)
	case errors.As(err, &layout):
		return fmt.Errorf("the datapath pinned at %s is of another version of netcube than this CLI (%v): use the netcube of the agent's release", root, err)
	case errors.Is(err, os.ErrNotExist):
		if found := pinnedBelow(root); len(found) > 0 {
			return fmt.Errorf("no datapath pinned at %s itself, but below it: %s (--bpf-root one of them, or $%s)", root, strings.Join(found, ", "), EnvBPFRoot)
		}
		return fmt.Errorf("no datapath pinned at %s: is the netcube agent running on this node, with --bpf-root %s? (--bpf-root or $%s; %s): %w",
			root, root, EnvBPFRoot, sandboxHint, err)
	}
	return fmt.Errorf("%s: %w", root, err)
}

// pinnedBelow lists the directories under root, two levels down, that
// hold a datapath's pins (sandbox NAME/NODE directories).
func pinnedBelow(root string) []string {
	var found []string
	for _, pattern := range []string{"*/" + pinMarker, "*/*/" + pinMarker} {
		m, _ := filepath.Glob(filepath.Join(root, pattern))
		for _, p := range m {
			found = append(found, filepath.Dir(p))
		}
	}
	return found
}

// pinMarker is a map every datapath pins (the conntrack table).
const pinMarker = "ct_flows"
