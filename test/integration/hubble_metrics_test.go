package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/sandbox"
)

// notApplicable are the metrics Cilium's Hubble dashboard queries that
// netcube cannot serve, each with the reason; they must not be on
// /metrics (netcube does not fake them).
var notApplicable = map[string]string{
	"hubble_dns_queries_total":                    "DNS metrics come from Cilium's DNS proxy; netcube has none",
	"hubble_dns_responses_total":                  "DNS metrics come from Cilium's DNS proxy; netcube has none",
	"hubble_dns_response_types_total":             "DNS metrics come from Cilium's DNS proxy; netcube has none",
	"hubble_http_requests_total":                  "HTTP metrics come from Cilium's L7 proxy (Envoy); netcube has none",
	"hubble_http_responses_total":                 "HTTP metrics come from Cilium's L7 proxy (Envoy); netcube has none",
	"hubble_http_request_duration_seconds_bucket": "HTTP metrics come from Cilium's L7 proxy (Envoy); netcube has none",
	"hubble_icmp_total":                           "counted by ICMP type and code, which netcube's datapath events do not carry",
}

// served are the metrics netcube serves (package hubble/metrics).
var served = []string{"hubble_flows_processed_total", "hubble_drop_total", "hubble_tcp_flags_total",
	"hubble_policy_verdicts_total", "hubble_port_distribution_total"}

// ciliumDashboardMetrics returns the metric names the PromQL of Cilium's
// own Hubble dashboard (in the cilium module hack/tools/hubble pins)
// queries.
func ciliumDashboardMetrics(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/cilium/cilium")
	cmd.Dir = filepath.Join("..", "..", "hack", "tools", "hubble")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download github.com/cilium/cilium (hack/tools/hubble): %v\n%s", err, out)
	}
	var mod struct{ Dir, Version string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download printed %s: %v", out, err)
	}
	path := filepath.Join(mod.Dir, "install/kubernetes/cilium/files/hubble/dashboards/hubble-dashboard.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dashboard any
	if err := json.Unmarshal(b, &dashboard); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var exprs []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "expr" {
					exprs = append(exprs, s)
				} else {
					walk(x)
				}
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(dashboard)
	names := map[string]bool{}
	metricName := regexp.MustCompile(`\bhubble_[a-z0-9_]+\b`)
	for _, e := range exprs {
		for _, n := range metricName.FindAllString(e, -1) {
			names[n] = true
		}
	}
	var list []string
	for n := range names {
		list = append(list, n)
	}
	sort.Strings(list)
	if len(exprs) < 10 || len(list) < 5 {
		t.Fatalf("%s (cilium %s): %d expressions, metrics %v: not the dashboard this test knows", path, mod.Version, len(exprs), list)
	}
	t.Logf("cilium %s hubble-dashboard.json queries %v", mod.Version, list)
	return list
}

// scrape reads a node's agent's /metrics: series (name{labels} as the
// agent prints them) -> value.
func scrape(t *testing.T, sb *sandbox.Sandbox, node sandbox.Node) map[string]float64 {
	t.Helper()
	out, err := sb.Output(node.Name, "curl", "-sf", "127.0.0.1:10249/metrics")
	if err != nil {
		t.Fatalf("/metrics of %s: %v", node.Name, err)
	}
	m := map[string]float64{}
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

// hasMetric: some series of name is on the scrape, and their sum.
func hasMetric(m map[string]float64, name string) (float64, bool) {
	var sum float64
	found := false
	for s, v := range m {
		if s == name || strings.HasPrefix(s, name+"{") {
			sum, found = sum+v, true
		}
	}
	return sum, found
}

// TestCiliumHubbleDashboardMetrics: every metric Cilium's Hubble
// dashboard queries is either served by a real agent's /metrics, moving
// with traffic made here (connections a NetworkPolicy allows, packets it
// denies, a Service without endpoints refusing), or listed above with the
// reason it cannot apply, and then absent.
func TestCiliumHubbleDashboardMetrics(t *testing.T) {
	queried := ciliumDashboardMetrics(t)
	isServed := map[string]bool{}
	for _, n := range served {
		isServed[n] = true
	}
	for _, n := range queried {
		if !isServed[n] && notApplicable[n] == "" {
			t.Errorf("the dashboard queries %s, which netcube neither serves nor lists as not applicable", n)
		}
	}

	sb := upWith(t, "hmetrics", sandbox.Config{})
	top := sb.Topology
	clientNode := top.Nodes[0]
	echo := top.EchoBackends()[len(top.EchoBackends())-1] // another node than the client's
	echoNode, _ := top.Node(echo.Node)
	direct := net.JoinHostPort(echo.IP4.String(), fmt.Sprint(sandbox.PodPort))
	port := fmt.Sprint(sandbox.PodPort)
	moved := func(before, after map[string]float64, series string) float64 { return after[series] - before[series] }
	var (
		allowedTCP = `hubble_flows_processed_total{protocol="TCP",subtype="",type="PolicyVerdict",verdict="FORWARDED"}`
		allowedUDP = `hubble_flows_processed_total{protocol="UDP",subtype="",type="PolicyVerdict",verdict="FORWARDED"}`
		verdictOK  = `hubble_policy_verdicts_total{action="forwarded",direction="ingress",match="l3-l4"}`
		syn        = `hubble_tcp_flags_total{family="IPv4",flag="SYN"}`
		tcpPort    = `hubble_port_distribution_total{port="` + port + `",protocol="TCP"}`
		udpPort    = `hubble_port_distribution_total{port="` + port + `",protocol="UDP"}`
		denied     = `hubble_drop_total{protocol="TCP",reason="POLICY_DENIED"}`
		deniedFlow = `hubble_flows_processed_total{protocol="TCP",subtype="",type="Drop",verdict="DROPPED"}`
		verdictNo  = `hubble_policy_verdicts_total{action="dropped",direction="ingress",match="none"}`
		noBackend  = `hubble_drop_total{protocol="TCP",reason="SERVICE_BACKEND_NOT_FOUND"}`
	)

	// A policy admitting the client to the echo pods on the pods' port.
	if err := top.WriteManifest("policy.yaml", `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: echo, namespace: default}
spec:
  podSelector: {matchLabels: {app: echo}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: client}}}]
    ports: [{protocol: TCP, port: `+port+`}, {protocol: UDP, port: `+port+`}]
`); err != nil {
		t.Fatal(err)
	}
	start := scrape(t, sb, echoNode)
	testenv.WaitFor(t, 15*time.Second, "the policy's allowed connections counted on "+echoNode.Name, func() bool {
		if r := requests(t, sb, "tcp", direct, 1); r[0].Err != "" {
			t.Fatalf("TCP to %s, which the policy allows: %s", direct, r[0].Err)
		}
		return moved(start, scrape(t, sb, echoNode), verdictOK) > 0
	})
	// Positive control: connections made now are each counted.
	before := scrape(t, sb, echoNode)
	for _, proto := range []string{"tcp", "udp"} {
		for _, r := range requests(t, sb, proto, direct, 3) {
			if r.Err != "" {
				t.Fatalf("%s to %s, which the policy allows: %s", proto, direct, r.Err)
			}
		}
	}
	testenv.WaitFor(t, 5*time.Second, "3 TCP and UDP connections counted on "+echoNode.Name, func() bool {
		after := scrape(t, sb, echoNode)
		return moved(before, after, allowedTCP) >= 3 && moved(before, after, allowedUDP) >= 1 && moved(before, after, verdictOK) >= 4 &&
			moved(before, after, syn) >= 3 && moved(before, after, tcpPort) >= 3 && moved(before, after, udpPort) >= 1
	})
	// Negative: nothing was denied.
	if v := scrape(t, sb, echoNode)[denied]; v != 0 {
		t.Errorf("%s = %v on %s before any packet was denied", denied, v, echoNode.Name)
	}

	// Now the echo pods admit app=other alone: the client's TCP is denied.
	if err := top.WriteManifest("policy.yaml", `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: echo, namespace: default}
spec:
  podSelector: {matchLabels: {app: echo}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: other}}}]
`); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the policy enforced", func() bool {
		return requests(t, sb, "tcp", direct, 1, "--timeout", "300ms")[0].Err != ""
	})
	before = scrape(t, sb, echoNode)
	for _, r := range requests(t, sb, "tcp", direct, 2, "--timeout", "300ms") {
		if r.Err == "" {
			t.Fatalf("TCP to %s passed a policy that denies it", direct)
		}
	}
	testenv.WaitFor(t, 5*time.Second, "the denied packets counted on "+echoNode.Name, func() bool {
		after := scrape(t, sb, echoNode)
		return moved(before, after, denied) >= 2 && moved(before, after, deniedFlow) >= 2 && moved(before, after, verdictNo) >= 2
	})

	// A Service without endpoints refuses, on the client's node.
	before = scrape(t, sb, clientNode)
	for _, r := range requests(t, sb, "tcp", net.JoinHostPort(sandbox.EmptyIPs[0], "80"), 2) {
		refusedFast(t, r)
	}
	testenv.WaitFor(t, 5*time.Second, "the refusals counted on "+clientNode.Name, func() bool {
		return moved(before, scrape(t, sb, clientNode), noBackend) >= 2
	})

	// The judge: each metric the dashboard queries is there and counted,
	// or not applicable and absent.
	final := scrape(t, sb, echoNode)
	var counted []string
	for s, v := range final {
		if strings.HasPrefix(s, "hubble_") {
			counted = append(counted, fmt.Sprintf("%s %v", s, v))
		}
	}
	sort.Strings(counted)
	t.Logf("the Hubble metrics of %s:\n%s", echoNode.Name, strings.Join(counted, "\n"))
	for _, n := range queried {
		sum, found := hasMetric(final, n)
		switch {
		case isServed[n] && (!found || sum == 0):
			t.Errorf("the dashboard's %s: on /metrics of %s %v, total %v; want counted", n, echoNode.Name, found, sum)
		case !isServed[n] && found:
			t.Errorf("%s is on /metrics of %s, though not applicable (%s)", n, echoNode.Name, notApplicable[n])
		case !isServed[n]:
			t.Logf("%s: not applicable: %s", n, notApplicable[n])
		}
	}
	for _, n := range served {
		if _, found := hasMetric(final, n); !found {
			t.Errorf("%s is not on /metrics of %s", n, echoNode.Name)
		}
	}
}

// TestHubbleMetricsSwitch: --hubble-metrics=drop serves the drops alone: a
// refusal is counted (the positive control), the flows are not.
func TestHubbleMetricsSwitch(t *testing.T) {
	sb := upWith(t, "hmetricsw", sandbox.Config{AgentArgs: []string{"--hubble-metrics=drop"}})
	node := sb.Topology.Nodes[0]
	for _, r := range requests(t, sb, "tcp", net.JoinHostPort(sandbox.EmptyIPs[0], "80"), 2) {
		refusedFast(t, r)
	}
	noBackend := `hubble_drop_total{protocol="TCP",reason="SERVICE_BACKEND_NOT_FOUND"}`
	testenv.WaitFor(t, 5*time.Second, "the refusals counted on "+node.Name, func() bool {
		return scrape(t, sb, node)[noBackend] >= 2
	})
	m := scrape(t, sb, node)
	for _, n := range served {
		if _, found := hasMetric(m, n); found != (n == "hubble_drop_total") {
			t.Errorf("--hubble-metrics=drop: %s on /metrics: %v", n, found)
		}
	}
}
