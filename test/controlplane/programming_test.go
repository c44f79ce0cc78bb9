package controlplane

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netcube/netcube/internal/testenv"
)

// TestNetworkProgrammingLatencyMetric: an EndpointSlice written through
// the API with the EndpointSlice controller's last-change-trigger-time is
// timed once programmed, on /metrics, from that time (which may be before
// the API write: the pod's change), not from its arrival.
func TestNetworkProgrammingLatencyMetric(t *testing.T) {
	a := startAgent(t, pinDir(t))
	c, ns := env.Client, "default"
	created, err := c.CoreV1().Services(ns).Create(ctx(t), service(ns, "timed", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Services(ns).Delete(ctx(t), "timed", metav1.DeleteOptions{}) })
	histogram := func() (count int, sum float64) {
		m := a.get("/metrics", a.metrics)
		_, _ = fmt.Sscanf(grep(m, "netcube_network_programming_duration_seconds_count"), "netcube_network_programming_duration_seconds_count %d", &count)
		_, _ = fmt.Sscanf(grep(m, "netcube_network_programming_duration_seconds_sum"), "netcube_network_programming_duration_seconds_sum %g", &sum)
		return count, sum
	}
	write := func(addr string, triggered time.Time, update bool) {
		t.Helper()
		s := slice(ns, "timed", "timed", false, ready(addr))
		s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: triggered.UTC().Format(time.RFC3339Nano)}
		if update {
			cur, err := c.DiscoveryV1().EndpointSlices(ns).Get(ctx(t), "timed", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s.ResourceVersion = cur.ResourceVersion
			_, err = c.DiscoveryV1().EndpointSlices(ns).Update(ctx(t), s, metav1.UpdateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return
		}
		if _, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx(t), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.DiscoveryV1().EndpointSlices(ns).Delete(ctx(t), "timed", metav1.DeleteOptions{}) })
	}
	programmedWith := func(addr string) {
		t.Helper()
		testenv.WaitFor(t, bound, "the Service programmed with "+addr, func() bool {
			return holds(programmed(t, a.pins), expect(created, []string{addr}, nil))
		})
	}

	count0, sum0 := histogram()
	write("10.244.1.21", time.Now(), false)
	programmedWith("10.244.1.21")
	var count1 int
	var sum1 float64
	testenv.WaitFor(t, bound, "the change timed", func() bool { count1, sum1 = histogram(); return count1 == count0+1 })
	if d := sum1 - sum0; d < 0 || d > bound.Seconds() {
		t.Errorf("a change programmed within %v timed at %.3f s", bound, d)
	}

	// A change triggered half a second before its write (after the agent
	// started: changes older than the agent are not counted): timed from
	// the trigger.
	const before = 500 * time.Millisecond
	time.Sleep(before)
	write("10.244.1.22", time.Now().Add(-before), true)
	programmedWith("10.244.1.22")
	var count2 int
	var sum2 float64
	testenv.WaitFor(t, bound, "the second change timed", func() bool { count2, sum2 = histogram(); return count2 == count1+1 })
	if d := sum2 - sum1; d < before.Seconds() {
		t.Errorf("a change triggered %v before its write timed at %.3f s: not from its trigger", before, d)
	}
}
