package k8s

import (
	"fmt"
	"net/netip"
)

// unmapPrefix reads an IPv4-mapped IPv6 prefix (::ffff:a.b.c.d/n) as the
// IPv4 prefix a.b.c.d/(n-96) it is: the datapath keys IPv4 addresses
// v4-mapped in 16 bytes, so the two must agree. One shorter than /96
// covers every IPv4 address and IPv6 addresses besides; read as either, it
// would admit more or other clients than written (its length went to a
// negative IPv4 one, which admitted every client), so it is refused: the
// caller fails closed. Other prefixes come back masked.
func unmapPrefix(p netip.Prefix) (netip.Prefix, error) {
	if !p.Addr().Is4In6() {
		return p.Masked(), nil
	}
	if p.Bits() < 96 {
		return netip.Prefix{}, fmt.Errorf("%s is an IPv4-mapped prefix shorter than /96, which covers all of IPv4 and part of IPv6: write the IPv4 and IPv6 ranges apart", p)
	}
	return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Masked(), nil
}
