package controlplane

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/faultrec"
	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/pkg/model"
)

// TestAPIServerOutage: with the API server down, the agent keeps running
// and its datapath keeps the last state; /readyz fails once the outage
// outlasts the grace (--api-unreachable-grace), saying why; every change
// made meanwhile (a new Service, another's endpoints replaced) is applied
// when the server is back, and the agent is ready again. (The short
// version of issue 19's ten minutes; `make reliability` runs the long one.)
func TestAPIServerOutage(t *testing.T) {
	a := startAgent(t, pinDir(t), "--api-unreachable-grace", "2s")
	const ns = "outage"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range []string{"before", "during"} {
			_ = env.Client.CoreV1().Services(ns).Delete(ctx(t), n, metav1.DeleteOptions{})
			_ = env.Client.DiscoveryV1().EndpointSlices(ns).Delete(ctx(t), n+"-1", metav1.DeleteOptions{})
		}
		_ = env.Client.CoreV1().Namespaces().Delete(ctx(t), ns, metav1.DeleteOptions{})
	})
	fe := func(ip string) model.Frontend {
		return model.Frontend{Addr: netip.MustParseAddr(ip), Port: 80, Proto: model.TCP}
	}
	backendsOf := func(ip string) []model.Backend { return programmed(t, a.pins)[fe(ip)] }
	hasOnly := func(ip, backend string) bool {
		bs := backendsOf(ip)
		return len(bs) == 1 && bs[0].Addr == netip.MustParseAddr(backend)
	}
	if _, err := env.Client.CoreV1().Services(ns).Create(ctx(t), serviceIn(ns, "before", "10.96.160.1", time.Now()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx(t), sliceIn(ns, "before-1", "before", 8080, "10.244.70.1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the Service programmed", func() bool { return hasOnly("10.96.160.1", "10.244.70.1") })
	if got := a.get("/readyz", a.healthz); got != "ok" {
		t.Fatalf("not ready before the outage: %q", got)
	}

	var readyz string
	// The outage starts when the server begins to stop, which is before
	// RestartAPIServer calls back: the agent may see it fail from then.
	start := time.Now()
	err := env.RestartAPIServer(func() error {
		for !strings.Contains(readyz, "unreachable") {
			if time.Since(start) > 20*time.Second {
				return fmt.Errorf("/readyz still says %q 20s into the outage", readyz)
			}
			time.Sleep(100 * time.Millisecond)
			if code, body := a.status("/readyz", a.healthz); code == 503 {
				readyz = body
			}
		}
		if time.Since(start) < 2*time.Second {
			return fmt.Errorf("/readyz failed %s into the outage, before the grace: %q", time.Since(start), readyz)
		}
		for faultrec.Long() && time.Since(start) < outage {
			time.Sleep(10 * time.Second)
			if !a.alive() {
				return fmt.Errorf("the agent exited %s into the outage", time.Since(start))
			}
		}
		if !a.alive() {
			return fmt.Errorf("the agent exited during the outage")
		}
		if !hasOnly("10.96.160.1", "10.244.70.1") {
			return fmt.Errorf("the datapath lost its state during the outage: %v", backendsOf("10.96.160.1"))
		}
		// Changes made while the server is down (as another control plane
		// member's writes would be): one per revision.
		for _, o := range []kubeenv.StoredObject{
			{Resource: corev1.Resource("services"), Version: corev1.SchemeGroupVersion, Object: serviceIn(ns, "during", "10.96.160.2", time.Now())},
			{Resource: discoveryv1.Resource("endpointslices"), Version: discoveryv1.SchemeGroupVersion, Object: sliceIn(ns, "during-1", "during", 8080, "10.244.70.2")},
			{Resource: discoveryv1.Resource("endpointslices"), Version: discoveryv1.SchemeGroupVersion, Object: sliceIn(ns, "before-1", "before", 8080, "10.244.70.3")},
		} {
			if err := env.StoreDirect(ctx(t), []kubeenv.StoredObject{o}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("/readyz during the outage: %q", readyz)
	back := time.Now()
	testenv.WaitFor(t, 60*time.Second, "the changes made during the outage applied", func() bool {
		return hasOnly("10.96.160.2", "10.244.70.2") && hasOnly("10.96.160.1", "10.244.70.3")
	})
	applied := time.Since(back)
	testenv.WaitFor(t, 30*time.Second, "ready again", func() bool { return a.get("/readyz", a.healthz) == "ok" })
	length := "until /readyz failed (2 s grace)"
	if faultrec.Long() {
		length = outage.String()
	}
	faultrec.Write(t, faultrec.Record{Fault: "API server down " + length, Path: "API", ConvergeSeconds: applied.Seconds(),
		Note: "datapath kept its state; 3 changes made during the outage applied after it"})
}

// outage is how long the API server stays down in the long version.
const outage = 10 * time.Minute
