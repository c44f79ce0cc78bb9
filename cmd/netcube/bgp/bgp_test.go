package bgp

import (
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/pkg/localapi"
)

// fakeAgent serves st at localapi.BGPPath on a unix socket, as the agent's
// local API does, and returns the socket's path.
func fakeAgent(t *testing.T, st localapi.BGPStatus) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(localapi.BGPPath, func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(st)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sock
}

func runBGP(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut strings.Builder
	code = Run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// A node with one session up and three that are not (a peer that flaps,
// one that never answers OPEN, one that refuses): every row says its
// state, "-" for the uptime of a session that is not up, and its counts;
// the failed apply is shown, and nothing goes to stderr.
func TestPeersWithSessionsNotUp(t *testing.T) {
	sock := fakeAgent(t, localapi.BGPStatus{
		Active: true, LocalASN: 65000, RouterID: "192.0.2.10",
		Peers: []localapi.BGPPeer{
			{Address: "198.18.0.2", ASN: 65001, State: "established", Uptime: time.Hour + 2*time.Minute + 3*time.Second + 400*time.Millisecond, Advertised: 2, Received: 1},
			{Address: "198.19.0.2", ASN: 65001, State: "idle", Received: 1},
			{Address: "127.0.0.3", ASN: 65003, State: "opensent"},
			{Address: "127.0.0.4", ASN: 65004, State: "active"},
		},
		Routes: []localapi.BGPRoute{{Prefix: "10.244.7.0/24"}, {Prefix: "203.0.113.10/32"}},
		Error:  "bgp: adding peer 127.0.0.5: connection refused",
	})
	code, out, errOut := runBGP(t, "peers", "--socket", sock)
	if code != 0 || errOut != "" {
		t.Fatalf("netcube bgp peers: exit %d, stderr %q\n%s", code, errOut, out)
	}
	t.Logf("netcube bgp peers:\n%s", out)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 7 {
		t.Fatalf("got %d lines, want a summary, the failed apply, the header and 4 peers:\n%s", len(lines), out)
	}
	if want := "BGP: local ASN 65000, router id 192.0.2.10, 2 routes announced"; lines[0] != want {
		t.Errorf("summary %q, want %q", lines[0], want)
	}
	if !strings.Contains(lines[1], "last apply failed (retried): bgp: adding peer 127.0.0.5") {
		t.Errorf("the failed apply is not shown: %q", lines[1])
	}
	if f := strings.Fields(lines[2]); strings.Join(f, " ") != "PEER ASN STATE UPTIME SENT RECEIVED ACCEPTED" {
		t.Errorf("header %q", lines[2])
	}
	for i, want := range []string{
		"198.18.0.2 65001 established 1h2m3s 2 1 0",
		"198.19.0.2 65001 idle - 0 1 0",
		"127.0.0.3 65003 opensent - 0 0 0",
		"127.0.0.4 65004 active - 0 0 0",
	} {
		if got := strings.Join(strings.Fields(lines[3+i]), " "); got != want {
			t.Errorf("peer row %d: %q, want %q", i, got, want)
		}
	}
	// The columns line up (tabwriter): every row's STATE starts where
	// the header's does.
	col := strings.Index(lines[2], "STATE")
	for _, l := range lines[3:] {
		if !regexp.MustCompile(`^\S+\s+\S+\s+$`).MatchString(l[:col]) || l[col] == ' ' {
			t.Errorf("row %q: STATE not in the header's column %d", l, col)
		}
	}

	code, out, errOut = runBGP(t, "peers", "-o", "json", "--socket", sock)
	if code != 0 || errOut != "" {
		t.Fatalf("netcube bgp peers -o json: exit %d, stderr %q", code, errOut)
	}
	var st localapi.BGPStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if len(st.Peers) != 4 || st.Peers[1].State != "idle" || st.Peers[1].Uptime != 0 || st.Peers[3].State != "active" {
		t.Errorf("-o json peers: %+v", st.Peers)
	}
}

// Positive control for the case above: with every session up, no row
// shows "-" and no failed apply is printed.
func TestPeersAllUp(t *testing.T) {
	sock := fakeAgent(t, localapi.BGPStatus{
		Active: true, LocalASN: 65000, RouterID: "192.0.2.10",
		Peers: []localapi.BGPPeer{{Address: "198.18.0.2", ASN: 65001, State: "established", Uptime: 90 * time.Second, Advertised: 2, Received: 1}},
	})
	code, out, errOut := runBGP(t, "peers", "--socket", sock)
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if strings.Contains(out, "last apply failed") || strings.Contains(out, " - ") {
		t.Errorf("all up, but:\n%s", out)
	}
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "198.18.0.2 65001 established 1m30s 2 1 0") {
		t.Errorf("row missing:\n%s", out)
	}
}

// A node no peering selects says so, and an agent that does not answer is
// an error (exit 1, on stderr), not an empty table.
func TestPeersOffAndNoAgent(t *testing.T) {
	sock := fakeAgent(t, localapi.BGPStatus{Active: false})
	code, out, _ := runBGP(t, "peers", "--socket", sock)
	if code != 0 || !strings.Contains(out, "BGP: off on this node") {
		t.Errorf("inactive: exit %d\n%s", code, out)
	}
	code, out, errOut := runBGP(t, "peers", "--socket", filepath.Join(t.TempDir(), "none.sock"))
	if code != 1 || out != "" || !strings.Contains(errOut, "netcube bgp peers:") {
		t.Errorf("no agent: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
