package lb

import (
	"testing"

	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// TestFlagsMatchTheDatapath: every frontend option has its own bit of the
// generated enum lb_svc_flags, and reads back as itself.
func TestFlagsMatchTheDatapath(t *testing.T) {
	seen := datapath.ServiceFlags(0)
	for _, b := range flagBits {
		if b.bpf == 0 || seen&b.bpf != 0 {
			t.Errorf("option %d: datapath bit %d is zero or taken twice", b.model, b.bpf)
		}
		seen |= b.bpf
		if got := modelFlags(bpfFlags(b.model)); got != b.model {
			t.Errorf("option %d reads back as %d", b.model, got)
		}
	}
	all := model.External | model.Local | model.Maglev | model.SourceRanges
	if got := modelFlags(bpfFlags(all)); got != all {
		t.Errorf("all options read back as %d, want %d", got, all)
	}
}
