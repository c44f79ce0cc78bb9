package controlplane

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
)

// TestIdentityMapSizedFromTheCluster: the agent sizes pol_hosts (every
// pod address of the cluster) from the number of Pods the API holds, read
// at start, and logs it; --policy-identity-map-size overrides it, and a
// restart at another size carries the identities over (a cluster that
// grew is sized again at the agent's next start). (The
// sizes themselves, past the default's 16,384 pods: pkg/agent
// TestIdentityMapSize.)
func TestIdentityMapSizedFromTheCluster(t *testing.T) {
	c := clientFor(t, env.Kubeconfig)
	// (No controller makes the namespace's default ServiceAccount here.)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "mapsize", Namespace: "default"}}
	if _, err := c.CoreV1().ServiceAccounts("default").Create(ctx(t), sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.CoreV1().ServiceAccounts("default").Delete(context.Background(), sa.Name, metav1.DeleteOptions{})
	})
	for i := range 30 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("mapsize-%d", i), Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: "node-elsewhere", ServiceAccountName: sa.Name, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		if _, err := c.CoreV1().Pods("default").Create(ctx(t), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.CoreV1().Pods("default").Delete(context.Background(), p.Name, *metav1.NewDeleteOptions(0))
		})
	}
	l, err := c.CoreV1().Pods("").List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hostsSize := func(pins string) uint32 {
		maps, closeMaps, err := datapath.OpenPinned(pins)
		if err != nil {
			t.Fatal(err)
		}
		defer closeMaps()
		return maps.Map(policy.MapHosts).MaxEntries()
	}
	logOf := func(a *agent) string {
		b, err := os.ReadFile(a.log)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	pins := pinDir(t)
	a := startAgent(t, pins)
	want := fmt.Sprintf("pods=%d ", len(l.Items))
	line := ""
	for _, l := range strings.Split(logOf(a), "\n") {
		if strings.Contains(l, "policy identity maps sized from the cluster") {
			line = l
		}
	}
	if !strings.Contains(line, want) || !strings.Contains(line, "entries=65536") {
		t.Errorf("the agent's sizing, from %d Pods: %q, want %q and entries=65536", len(l.Items), line, want)
	}
	if got := hostsSize(pins); got != 65536 {
		t.Errorf("pol_hosts holds %d entries, want 65536", got)
	}
	a.stop()

	// The same pins at another size: the identities carry over.
	a = startAgent(t, pins, "--policy-identity-map-size=1024")
	if got := hostsSize(pins); got != 1024 {
		t.Errorf("with --policy-identity-map-size=1024, pol_hosts holds %d entries", got)
	}
	if strings.Contains(logOf(a), "sized from the cluster") {
		t.Errorf("the agent sized pol_hosts from the cluster though the flag gave its size")
	}
	if !strings.Contains(logOf(a), "map=pol_hosts old_value_size=4 old_size=65536") {
		t.Errorf("the restart at another size did not carry pol_hosts over:\n%s", logOf(a))
	}
}
