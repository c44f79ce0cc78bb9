package integration

import (
	"io"
	"os"
	"testing"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/sandbox"
)

// TestDownAfterCrash: `sandbox down` removes a sandbox whose agents and
// pods were killed and whose state directory is gone, from names alone.
func TestDownAfterCrash(t *testing.T) {
	testenv.RequireRoot(t)
	name := testenv.Name("c")
	_ = sandbox.Down(name, io.Discard)
	sb, err := sandbox.Up(sandbox.Config{Name: name, SocketLB: true, BinDir: binDir}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range sb.Topology.Nodes {
		if err := sb.StopAgent(n.Name, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(sb.Topology.StateDir); err != nil { // pid files and all
		t.Fatal(err)
	}
	if err := sandbox.Down(name, io.Discard); err != nil {
		t.Fatal(err)
	}
	assertGone(t, sb.Topology)
}
