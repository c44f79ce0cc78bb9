package policy

import (
	"unsafe"

	"github.com/netcube/netcube/pkg/datapath"
)

// endpointV1Size is a pol_endpoints value of the agents before rule sets:
// the pod's number, its flags, padding. Their entries were filed under
// the pod's number.
const endpointV1Size = 8

// upgradeEndpoint turns a pol_endpoints value of an earlier agent into
// the current layout (cube.MapSpec.Upgrade): the rule set is the pod's
// own number, under which that agent filed its entries, so a pod is
// judged by the same rules across the restart (neither opened nor shut)
// until this agent writes its rule sets.
func upgradeEndpoint(old []byte) ([]byte, bool) {
	size := int(unsafe.Sizeof(datapath.PolicyEndpoint{}))
	switch len(old) {
	case size:
		return old, true
	case endpointV1Size:
		v := make([]byte, size)
		copy(v[0:4], old[0:4]) // id
		copy(v[4:8], old[0:4]) // rule_set: the id
		copy(v[8:], old[4:])   // flags, padding
		return v, true
	}
	return nil, false
}

// samePeer carries an identity (struct pol_peer) over as it is: its
// maps change size, not layout (pol_hosts grows with the cluster).
func samePeer(old []byte) ([]byte, bool) {
	return old, len(old) == int(unsafe.Sizeof(datapath.PolicyPeer{}))
}
