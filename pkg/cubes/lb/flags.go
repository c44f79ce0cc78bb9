package lb

import (
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// flagBits pairs each frontend option with its bit in the master entry
// (enum lb_svc_flags, generated from bpf/cubes/lb/lb_maps.h).
var flagBits = []struct {
	model model.FrontendFlags
	bpf   datapath.ServiceFlags
}{
	{model.External, datapath.ServiceExternal},
	{model.Local, datapath.ServiceLocal},
	{model.Maglev, datapath.ServiceMaglev},
	{model.SourceRanges, datapath.ServiceSourceRanges},
	{model.Announce, datapath.ServiceAnnounce},
	{model.TwoScopes, datapath.ServiceTwoScopes},
}

// bpfFlags is f as the datapath reads it.
func bpfFlags(f model.FrontendFlags) datapath.ServiceFlags {
	var out datapath.ServiceFlags
	for _, b := range flagBits {
		if f&b.model != 0 {
			out |= b.bpf
		}
	}
	return out
}

// modelFlags reads back what bpfFlags wrote.
func modelFlags(f datapath.ServiceFlags) model.FrontendFlags {
	var out model.FrontendFlags
	for _, b := range flagBits {
		if f&b.bpf != 0 {
			out |= b.model
		}
	}
	return out
}

// scopeOf is the key's view of fe; scopeFlag tells the datapath, in the
// master entry, which one it read (its slots are in the same scope).
func scopeOf(fe model.Frontend) datapath.Scope {
	if fe.Internal {
		return datapath.ScopeInternal
	}
	return datapath.ScopeExternal
}

func scopeFlag(fe model.Frontend) datapath.ServiceFlags {
	if fe.Internal {
		return datapath.ServiceScopeInt
	}
	return 0
}
