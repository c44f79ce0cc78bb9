package datapath

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// TestKernelHasEverything: this machine's kernel passes the check the agent
// runs at start (the CI kernel is the one netcube is tested on).
func TestKernelHasEverything(t *testing.T) {
	if err := CheckKernel(); err != nil {
		t.Fatal(err)
	}
}

// TestKernelCheckNamesWhatIsMissing: a feature the kernel lacks is named,
// with the kernel version that brings it, next to the minimum version; the
// ones it has are not listed.
func TestKernelCheckNamesWhatIsMissing(t *testing.T) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatal(err)
	}
	features := append([]kernelFeature{
		{"a kfunc from the future", "9.9", funcExists("bpf_netcube_no_such_kfunc")},
		{"an attach type from the future", "9.8", enumHas("bpf_attach_type", "BPF_NETCUBE_NO_SUCH_ATTACH")},
	}, kernelFeatures...)
	err = missingFeatures(spec, features)
	if err == nil {
		t.Fatal("missing features not reported")
	}
	for _, want := range []string{"a kfunc from the future (Linux 9.9)", "an attach type from the future (Linux 9.8)", "Linux >= " + MinKernel} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	for _, f := range kernelFeatures {
		if strings.Contains(err.Error(), f.what) {
			t.Errorf("error names %q, which this kernel has", f.what)
		}
	}
}
