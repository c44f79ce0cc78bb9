package lb

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/netcube/netcube/pkg/cube/cubetest"
	"github.com/netcube/netcube/pkg/model"
)

// programmedLog is an Observer that keeps the network programming
// latencies it is told.
type programmedLog struct{ got []time.Duration }

func (*programmedLog) ServiceSynced(time.Duration, time.Duration, error) {}
func (p *programmedLog) Programmed(d time.Duration)                      { p.got = append(p.got, d) }

// triggeredAt is Service i's slice, with endpoints, as the EndpointSlice
// controller writes it for a change triggered at at.
func triggeredAt(i int, at time.Time, endpoints ...string) *model.EndpointSlice {
	return sliceAnnotated(i, map[string]string{corev1.EndpointsLastChangeTriggerTime: at.UTC().Format(time.RFC3339Nano)}, endpoints...)
}

// TestNetworkProgrammingLatency: each endpoint change is timed once, from
// the trigger time its EndpointSlice carries to the end of the sync that
// programmed it: through the initial sync, and through a later sync that
// fails and is retried (timed when the retry has programmed it, not
// before). A slice delivered again unchanged (a relist) is no new change,
// and a change triggered before the agent started is not counted.
func TestNetworkProgrammingLatency(t *testing.T) {
	f := cubetest.New(t, nil, Cube{})
	log := &programmedLog{}
	r := NewReconciler(New(f.Maps), log)
	const wait = 30 * time.Millisecond

	// Positive control: the initial sync times the change it programs.
	r.OnService(svcKey(1), svc(1))
	r.OnEndpointSlice(sliceKey(1), triggeredAt(1, time.Now(), ep(1, 0)))
	time.Sleep(wait)
	r.OnSynced()
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if len(log.got) != 1 || log.got[0] < wait || log.got[0] > 10*time.Second {
		t.Fatalf("initial sync: latencies %v, want one of at least %v", log.got, wait)
	}

	// The same slice again (a relist): nothing new to time.
	held, _ := r.slices.get(sliceKey(1).Namespace, sliceKey(1).Name)
	again := triggeredAt(1, time.Unix(0, held.ChangeTriggered), ep(1, 0))
	r.OnEndpointSlice(sliceKey(1), again)
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if len(log.got) != 1 {
		t.Errorf("a slice delivered again as it was timed again: %v", log.got)
	}

	// A new change whose first sync fails: timed only once programmed.
	failed := failNth(f, 1)
	r.OnEndpointSlice(sliceKey(1), triggeredAt(1, time.Now(), ep(1, 0), ep(1, 1)))
	if err := r.Sync(); err == nil || !failed() {
		t.Fatalf("the injected failure did not fail the sync (err %v)", err)
	}
	if len(log.got) != 1 {
		t.Fatalf("a change whose sync failed was timed: %v", log.got)
	}
	f.FailWhen(nil)
	time.Sleep(150 * time.Millisecond) // the retry's backoff (100 ms)
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if bs := r.lb.(*Tables).Backends(svcFrontend(1)); len(bs) != 2 {
		t.Fatalf("after the retry the Service has backends %v, want 2", bs)
	}
	if len(log.got) != 2 || log.got[1] < 100*time.Millisecond {
		t.Errorf("after the retry: latencies %v, want a second one of at least the backoff", log.got)
	}

	// A change triggered before this agent started (a restart's first
	// list): not counted.
	log2 := &programmedLog{}
	r2 := NewReconciler(New(cubetest.New(t, nil, Cube{}).Maps), log2)
	r2.OnService(svcKey(2), svc(2))
	r2.OnEndpointSlice(sliceKey(2), triggeredAt(2, time.Now().Add(-time.Hour), ep(2, 0)))
	r2.OnSynced()
	if err := r2.Sync(); err != nil {
		t.Fatal(err)
	}
	if bs := r2.lb.(*Tables).Backends(svcFrontend(2)); len(bs) != 1 {
		t.Fatalf("backends %v, want the one endpoint", bs)
	}
	if len(log2.got) != 0 {
		t.Errorf("a change older than the agent was timed: %v", log2.got)
	}
}
