package yamldir

import (
	"fmt"
	"testing"

	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/source"
)

// bgpRecorder records NetworkBGPPeerings too.
type bgpRecorder struct{ *recorder }

func (r bgpRecorder) OnBGPPeering(name string, p *model.BGPPeering) {
	if p == nil {
		r.add("NetworkBGPPeering " + name + " deleted")
		return
	}
	r.add(fmt.Sprintf("NetworkBGPPeering %s asn %d peers %d", name, p.LocalASN, len(p.Peers)))
}
func (r bgpRecorder) OnBGPPeeringsSynced()     { r.add("peerings synced") }
func (r bgpRecorder) BGPPeeringKeys() []string { return nil }

const peeringYAML = `apiVersion: netcube.io/v1alpha1
kind: NetworkBGPPeering
metadata: {name: rack1}
spec:
  localASN: 64512
  peers:
  - {address: 172.30.11.254, asn: 64500}
  - {address: 172.30.11.253, asn: 0}
  advertise: {podCIDRs: true}
`

// TestBGPPeeringsAreDelivered: a NetworkBGPPeering in the directory
// reaches a handler that takes them, its bad peer named and left out
// while the good one is kept; deleting the file deletes it.
func TestBGPPeeringsAreDelivered(t *testing.T) {
	h := startWith(t, map[string]string{"bgp.yaml": peeringYAML}, func(r *recorder) source.Handler { return bgpRecorder{r} })
	h.expect("NetworkBGPPeering rack1 asn 64512 peers 1", "synced", "peerings synced")
	h.expectError("NetworkBGPPeering rack1", "spec.peers[1].asn: 0 is not an ASN")
	h.write("bgp.yaml", "")
	h.expect("NetworkBGPPeering rack1 deleted")
}
