package agent

import "testing"

// TestIdentityMapSize: pol_hosts holds two addresses per pod, twice over,
// as a power of two, never below the default: a cluster of 16,384 pods
// fits the default; one more doubles it.
func TestIdentityMapSize(t *testing.T) {
	for _, c := range []struct {
		pods int
		want uint32
	}{
		{0, 65536}, {1000, 65536}, {16384, 65536}, {16385, 131072},
		{100000, 524288}, {150000, 1 << 20}, {1 << 30, 1 << 30},
	} {
		if got := identityMapSize(c.pods); got != c.want {
			t.Errorf("%d pods: %d entries, want %d", c.pods, got, c.want)
		}
	}
}
