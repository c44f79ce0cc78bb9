package integration

import (
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/sandbox"
)

// TestNamedTargetPortDiffersPerPod: a Service whose targetPort is a name
// the pods serve on different port numbers (one EndpointSlice per port
// number, as the EndpointSlice controller writes them) reaches each pod on
// its own port, on both paths.
func TestNamedTargetPortDiffersPerPod(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			sb := up(t, path.socketLB)
			pods := sb.Topology.EchoBackends()
			odd := pods[len(pods)-1] // serves "http" on 9090, the others on 8080
			cmd := execIn(filepath.Join(binDir, sandbox.LabBinary), "pod", "serve", "--name", odd.Name+"-9090", "--port", "9090")
			if err := sb.Start(odd.Name, cmd); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			ips := []string{"10.96.0.95", "fd00:10:96::95"}
			ports := []sandbox.PortSpec{{Name: "http", Port: 80, Protocol: "TCP", TargetPort: "web"}}
			at := func(port int) []sandbox.PortSpec {
				return []sandbox.PortSpec{{Name: "http", Port: port, Protocol: "TCP"}}
			}
			var docs []string
			for _, v6 := range []bool{false, true} {
				a := sandbox.SliceYAML("named", v6, at(8080), pods[:len(pods)-1])
				b := strings.Replace(sandbox.SliceYAML("named", v6, at(9090), []sandbox.Pod{odd}), "name: named-ipv", "name: named-b-ipv", 1)
				docs = append(docs, a, b)
			}
			if err := sb.Topology.WriteManifest("named.yaml", sandbox.ServiceYAML("named", ips, ports)+"---\n"+strings.Join(docs, "---\n")); err != nil {
				t.Fatal(err)
			}
			for _, ip := range ips {
				addr := net.JoinHostPort(ip, "80")
				testenv.WaitFor(t, 10*time.Second, addr, func() bool { return requests(t, sb, "tcp", addr, 1, "--timeout", "200ms")[0].Err == "" })
				seen := map[string]int{}
				for _, r := range requests(t, sb, "tcp", addr, 60) {
					if r.Err != "" {
						t.Fatalf("%s: request %d failed: %s", addr, r.Seq, r.Err)
					}
					seen[r.Backend]++
				}
				// The odd pod answers on 9090 under its own name; on 8080
				// it would answer as itself.
				if seen[odd.Name+"-9090"] == 0 || seen[odd.Name] != 0 {
					t.Errorf("%s: answers %v; want %s reached on 9090 only", addr, seen, odd.Name)
				}
				for _, p := range pods[:len(pods)-1] {
					if seen[p.Name] == 0 {
						t.Errorf("%s: %s (on 8080) never answered: %v", addr, p.Name, seen)
					}
				}
			}
		})
	}
}

func execIn(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }
