package datapath

import (
	"fmt"
	"net/netip"
)

// SetNodeAddrs writes this node's address of each family (the source of
// SNATed external flows); an invalid address clears that family's, which
// stops its external Services with externalTrafficPolicy Cluster.
func (m *Maps) SetNodeAddrs(v4, v6 netip.Addr) error {
	for i, a := range []netip.Addr{v4, v6} {
		var v Addr
		if a.IsValid() {
			v = AddrFrom(a)
		}
		if err := Put(m, MapNodeAddrs, uint32(i), v); err != nil {
			return fmt.Errorf("node address %d: %w", i, err)
		}
	}
	return nil
}
