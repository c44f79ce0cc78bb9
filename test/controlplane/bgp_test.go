package controlplane

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/localapi"
	"github.com/netcube/netcube/pkg/source/kube"
)

const bgpCRD = chart + "/crds/networkbgppeerings.yaml"

func bgpPeering(t *testing.T, name, spec string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	doc := "apiVersion: netcube.io/v1alpha1\nkind: NetworkBGPPeering\nmetadata: {name: " + name + "}\nspec:\n" + spec
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestBGPPeeringsFromTheAPI: NetworkBGPPeerings come through the API
// server. The agent is ready without the CRD (no BGP); a peering that
// selects its Node makes its speaker run with the peering's ASN, the
// Node's address as router id and the Node's pod CIDR announced (its
// local API says so), one that selects another node changes nothing;
// the API server refuses a peering without peers; a peer whose password
// Secret is missing is named in an Event and left out while the other
// peer is kept; a second peering with another ASN is named in an Event
// and not applied; deleting the peering stops the speaker.
func TestBGPPeeringsFromTheAPI(t *testing.T) {
	c := env.Client
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", Labels: map[string]string{"netcube.io/rack": "r1"}},
		Spec:   corev1.NodeSpec{PodCIDR: "10.252.1.0/24", PodCIDRs: []string{"10.252.1.0/24"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.18.7.11"}}}}
	if _, err := c.CoreV1().Nodes().Create(ctx(t), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), "node1", metav1.DeleteOptions{}) })
	socket := filepath.Join(t.TempDir(), "agent.sock")
	a := startAgent(t, pinDir(t), "--api-socket", socket) // ready without the CRD
	_ = a
	status := func() localapi.BGPStatus {
		var st localapi.BGPStatus
		_ = json.Unmarshal([]byte(unixGet(socket, localapi.BGPPath)), &st)
		return st
	}
	if st := status(); st.Active {
		t.Fatalf("BGP active without any peering: %+v", st)
	}

	// The CRD goes when the test ends (waited for): the chart's dry run
	// (TestDeployManifests) creates it in this same API server.
	crdName := installCRD(t, bgpCRD, kube.NetworkBGPPeerings)
	t.Cleanup(func() {
		dc := dynClient(t)
		_ = dc.Resource(crds).Delete(context.Background(), crdName, metav1.DeleteOptions{})
		testenv.WaitFor(t, 30*time.Second, "the NetworkBGPPeering CRD deleted", func() bool {
			_, err := dc.Resource(crds).Get(context.Background(), crdName, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
	})
	d := dynClient(t).Resource(kube.NetworkBGPPeerings)
	t.Cleanup(func() {
		for _, n := range []string{"rack1", "rack2", "rack1-other"} {
			_ = d.Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	// Another node's peering: nothing here.
	if _, err := d.Create(ctx(t), bgpPeering(t, "rack2", "  nodeSelector: {matchLabels: {netcube.io/rack: r2}}\n  localASN: 64512\n  peers: [{address: 198.18.8.254, asn: 64500}]\n"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Positive control: this node's peering runs, with a peer whose
	// Secret is missing left out.
	spec := "  nodeSelector: {matchLabels: {netcube.io/rack: r1}}\n  localASN: 64512\n  peers:\n" +
		"  - {address: 198.18.7.254, asn: 64500, holdTime: 9s, keepaliveTime: 3s}\n" +
		"  - {address: 198.18.7.253, asn: 64500, passwordSecretRef: {name: no-such-secret, key: password}}\n" +
		"  advertise: {podCIDRs: true, loadBalancerIPs: true}\n"
	if _, err := d.Create(ctx(t), bgpPeering(t, "rack1", spec), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("BGP status: %s", unixGet(socket, localapi.BGPPath))
		}
	}()
	testenv.WaitFor(t, 30*time.Second, "the speaker running rack1's peering", func() bool {
		st := status()
		return st.Active && st.LocalASN == 64512 && st.RouterID == "198.18.7.11" && len(st.Peers) == 1 && st.Peers[0].Address == "198.18.7.254" &&
			len(st.Routes) == 1 && st.Routes[0].Prefix == "10.252.1.0/24"
	})
	if msg := eventFor(t, "default", "NetworkBGPPeering", "rack1", "PeerLeftOut"); !strings.Contains(msg, "spec.peers[1]") || !strings.Contains(msg, "no-such-secret") {
		t.Errorf("the Event on rack1 %q does not name spec.peers[1] and its Secret", msg)
	}

	// Refused by the API server: no peers, an ASN out of range.
	for _, bad := range []struct{ spec, field string }{
		{"  localASN: 64512\n  peers: []\n", "spec.peers"},
		{"  localASN: 0\n  peers: [{address: 198.18.7.254, asn: 64500}]\n", "spec.localASN"},
	} {
		if _, err := d.Create(ctx(t), bgpPeering(t, "refused", bad.spec), metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), bad.field) {
			t.Errorf("creating a NetworkBGPPeering with %q: %v, want an error naming %s", bad.spec, err, bad.field)
		}
	}
	// A second peering for this node with another ASN: reported, not applied.
	if _, err := d.Create(ctx(t), bgpPeering(t, "rack1-other", "  nodeSelector: {matchLabels: {netcube.io/rack: r1}}\n  localASN: 65001\n  peers: [{address: 198.18.7.252, asn: 64500}]\n"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if msg := eventFor(t, "default", "NetworkBGPPeering", "rack1-other", "PeeringConflict"); !strings.Contains(msg, "spec.localASN: 65001") {
		t.Errorf("the conflict Event %q does not name spec.localASN", msg)
	}
	if st := status(); st.LocalASN != 64512 || len(st.Peers) != 1 {
		t.Errorf("the conflicting peering was applied: %+v", st)
	}

	// The peering deleted: the speaker stops.
	for _, n := range []string{"rack1", "rack1-other"} {
		if err := d.Delete(ctx(t), n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, 20*time.Second, "the speaker stopped", func() bool { return !status().Active })
	if got := a.get("/readyz", a.healthz); got != "ok" {
		t.Errorf("/readyz: %q", got)
	}
}
