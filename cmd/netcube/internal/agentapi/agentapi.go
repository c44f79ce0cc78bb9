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

// Node is where a verb finds the node.
type Node struct {
	Socket, BPFRoot string
}

// Flags binds --socket and --bpf-root.
func (n *Node) Flags(fs *flag.FlagSet) {
	fs.StringVar(&n.Socket, "socket", DefaultSocket, "the agent's local API socket (its --api-socket)")
	fs.StringVar(&n.BPFRoot, "bpf-root", DefaultBPFRoot, "where the agent pins the datapath's maps (its --bpf-root)")
}

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
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("%w on %s (is it running, with --api-socket there?): %v", ErrNoAgent, n.Socket, err)
		}
		return nil, err
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

// Maps opens the datapath's pinned maps, read-only.
func (n Node) Maps() (*cube.Maps, func(), error) {
	if _, err := os.Stat(n.BPFRoot); err != nil {
		return nil, nil, fmt.Errorf("no datapath pinned at %s (is netcube installed on this node? --bpf-root): %w", n.BPFRoot, err)
	}
	maps, closeAll, err := datapath.OpenPinned(n.BPFRoot)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w (pinned by an agent of another version?)", n.BPFRoot, err)
	}
	return maps, closeAll, nil
}
