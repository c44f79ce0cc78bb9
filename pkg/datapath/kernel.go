package datapath

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// MinKernel is the oldest kernel netcube runs on: tcx links (6.6) and the
// bpf_sock_destroy kfunc (6.5).
const MinKernel = "6.6"

// kernelFeature is one thing the datapath needs of the kernel, found in the
// kernel's own BTF (so a backport counts, and a version number alone does
// not decide).
type kernelFeature struct {
	what  string // what netcube uses it for
	since string // the mainline kernel that has it
	found func(*btf.Spec) bool
}

var kernelFeatures = []kernelFeature{
	{"tcx links (tc_node on uplinks)", "6.6", enumHas("bpf_attach_type", "BPF_TCX_INGRESS")},
	{"cgroup getpeername hooks (socket-LB)", "5.8", enumHas("bpf_attach_type", "BPF_CGROUP_INET4_GETPEERNAME")},
	{"bpf_sock_destroy kfunc (closing UDP sockets of a removed backend)", "6.5", funcExists("bpf_sock_destroy")},
	{"UDP socket iterator (closing UDP sockets of a removed backend)", "5.9", funcExists("bpf_iter_udp")},
	{"LRU hash maps (socket-LB, policy, fragments)", "4.10", enumHas("bpf_map_type", "BPF_MAP_TYPE_LRU_HASH")},
	{"LPM trie maps (loadBalancerSourceRanges)", "4.11", enumHas("bpf_map_type", "BPF_MAP_TYPE_LPM_TRIE")},
}

// CheckKernel reports, in one error naming each, the kernel features the
// datapath needs and this kernel lacks; nil when it has them all. Run it
// before loading, so a too-old kernel gets this message and not a verifier
// dump.
func CheckKernel() error {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return fmt.Errorf("kernel BTF (/sys/kernel/btf/vmlinux) is needed to check and load netcube's datapath (CONFIG_DEBUG_INFO_BTF=y, Linux >= %s): %w", MinKernel, err)
	}
	return missingFeatures(spec, kernelFeatures)
}

func missingFeatures(spec *btf.Spec, features []kernelFeature) error {
	var missing []string
	for _, f := range features {
		if !f.found(spec) {
			missing = append(missing, fmt.Sprintf("%s (Linux %s)", f.what, f.since))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return errors.New("this kernel lacks what netcube's datapath needs (Linux >= " + MinKernel + "): " + strings.Join(missing, "; "))
}

func enumHas(enum, value string) func(*btf.Spec) bool {
	return func(s *btf.Spec) bool {
		var e *btf.Enum
		if err := s.TypeByName(enum, &e); err != nil {
			return false
		}
		for _, v := range e.Values {
			if v.Name == value {
				return true
			}
		}
		return false
	}
}

func funcExists(name string) func(*btf.Spec) bool {
	return func(s *btf.Spec) bool {
		var fn *btf.Func
		return s.TypeByName(name, &fn) == nil
	}
}
