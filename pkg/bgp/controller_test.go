package bgp

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
)

// fakeSpeaker records what the controller asks; fail makes Apply fail.
type fakeSpeaker struct {
	mu       sync.Mutex
	applies  [][]string
	stops    []bool
	failures int
}

func (f *fakeSpeaker) Apply(_ context.Context, _ Config, routes []Route) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures > 0 {
		f.failures--
		return errors.New("peer refused")
	}
	f.applies = append(f.applies, prefixes(routes))
	return nil
}

func (f *fakeSpeaker) Stop(_ context.Context, graceful bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stops = append(f.stops, graceful)
	return nil
}

func (f *fakeSpeaker) lastApply() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.applies) == 0 {
		return nil
	}
	return f.applies[len(f.applies)-1]
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestControllerConverges: nothing is applied before the Services and the
// peerings are synced (an agent restarting must not withdraw what its
// predecessor announced); then each change is applied, a failed Apply is
// retried until it succeeds, a peering's problem is an Event cleared when
// fixed, and the end of the agent stops the speaker gracefully.
func TestControllerConverges(t *testing.T) {
	sp := &fakeSpeaker{}
	rep := report.New()
	c := NewController("node1", sp, nil, rep)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()

	c.OnNode("node1", node1)
	c.OnNode("node2", &model.NodeInfo{Name: "node2"})
	c.OnBGPPeering("rack1", basePeering())
	web := model.ServiceID{Namespace: "default", Name: "web"}
	c.SetService(web, lb.Advertised{LoadBalancerIPs: addrs("192.0.2.10")})
	time.Sleep(100 * time.Millisecond)
	if got := sp.lastApply(); got != nil {
		t.Fatalf("applied before the initial sync: %v", got)
	}
	c.OnBGPPeeringsSynced()
	c.ServicesSynced()
	eventually(t, "pod CIDRs and the LoadBalancer IP announced", func() bool {
		return slices.Equal(sp.lastApply(), []string{"10.244.1.0/24", "192.0.2.10/32", "fd00:10:244:1::/64"})
	})

	sp.mu.Lock()
	sp.failures = 2
	sp.mu.Unlock()
	c.DeleteService(web)
	eventually(t, "the withdrawal applied after two failures", func() bool {
		return slices.Equal(sp.lastApply(), []string{"10.244.1.0/24", "fd00:10:244:1::/64"})
	})
	if c.Last().Err != nil {
		t.Errorf("last apply: %v", c.Last().Err)
	}

	// A second peering of another ASN: reported, then cleared once gone.
	other := basePeering()
	other.Name = "rack1-other"
	other.LocalASN = 65001
	c.OnBGPPeering(other.Name, other)
	eventually(t, "the conflict reported", func() bool { return rep.Count()[report.PeeringConflict] == 1 })
	c.OnBGPPeering(other.Name, nil)
	eventually(t, "the conflict cleared", func() bool { return rep.Count()[report.PeeringConflict] == 0 })

	// The peering goes: the speaker stops, withdrawing (not graceful).
	c.OnBGPPeering("rack1", nil)
	eventually(t, "stopped when no peering selects the node", func() bool {
		sp.mu.Lock()
		defer sp.mu.Unlock()
		return len(sp.stops) > 0 && !sp.stops[len(sp.stops)-1]
	})
	cancel()
	<-done
	if sp.stops[len(sp.stops)-1] != true {
		t.Errorf("the agent's end stopped the speaker with graceful=%v, want true", sp.stops[len(sp.stops)-1])
	}
}
