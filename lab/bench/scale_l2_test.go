package bench

import "testing"

// TestL2Expected: every Cluster Service has an announcer while an agent
// lives; a Local one while one of its endpoints' nodes has a live agent.
func TestL2Expected(t *testing.T) {
	if got := l2Expected(10, 10, 10, -1); got != 10 {
		t.Errorf("10 agents on 10 nodes: %d of 10 addresses", got)
	}
	// 1 agent of 10 nodes: the 5 Cluster Services, and of the Local ones
	// (odd i, on nodes i, i+3, i+6 mod 10) Service 7 alone has node 0.
	if got := l2Expected(10, 10, 1, -1); got != 5+1 {
		t.Errorf("1 agent: %d addresses, want 6", got)
	}
	if got := l2Expected(10, 10, 1, 0); got != 0 {
		t.Errorf("the only agent dead: %d addresses, want 0", got)
	}
}

// TestRequestCounts: apiserver_request_total summed by verb and resource.
func TestRequestCounts(t *testing.T) {
	m := apiServerMetrics(`apiserver_request_total{code="200",component="apiserver",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 7
apiserver_request_total{code="409",component="apiserver",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 1
apiserver_request_duration_seconds_count{verb="PUT",resource="leases"} 99`)
	got := requestCounts(m)
	if got["PUT leases"] != 9 || got["PATCH pods/status"] != 1 || len(got) != 2 {
		t.Errorf("counts %v", got)
	}
}

// TestL2Agree: agreement needs every agent answering, one alive count,
// and the addresses announced once each.
func TestL2Agree(t *testing.T) {
	ok := []agentL2{{ok: true, alive: 2, announcing: 3}, {ok: true, alive: 2, announcing: 4}}
	if !l2Agree(ok, 2, 7) {
		t.Error("agreeing agents not seen agreeing")
	}
	for name, got := range map[string][]agentL2{
		"a view behind":   {{ok: true, alive: 3, announcing: 3}, {ok: true, alive: 2, announcing: 4}},
		"a resync behind": {{ok: true, alive: 2, announcing: 2}, {ok: true, alive: 2, announcing: 4}},
		"one silent":      {{ok: true, alive: 2, announcing: 7}, {}},
	} {
		if l2Agree(got, 2, 7) {
			t.Errorf("%s: seen agreeing", name)
		}
	}
}
