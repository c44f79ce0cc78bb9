package datapath

import (
	"encoding/binary"
	"net/netip"
)

// Map layouts, generated from bpf/cubes/*/*_maps.h. Ports are in network byte order,
// as the datapath sees them; use Port and HostPort to convert.
type (
	Addr         = bpfNcAddr
	ServiceKey   = bpfLbSvcKey
	ServiceValue = bpfLbSvcVal
	Backend      = bpfLbBackend
	Frontend     = bpfLbFrontend
	CTKey        = bpfCtKey
	CTEntry      = bpfCtEntry
	CTAcct       = bpfCtAcct // struct ct_acct: a conntrack entry's packets and bytes while traced
	SockKey      = bpfSockKey

	AffinityKey      = bpfLbAffinityKey
	AffinityValue    = bpfLbAffinityVal
	AffinityMatchKey = bpfLbAffinityMatchKey
	SourceRangeKey   = bpfLbSourceRangeKey
	AnnounceKey      = bpfLbAnnounceKey
	AnnounceValue    = bpfLbAnnounceVal
	Uplink           = bpfLbUplink // lb_uplinks: an uplink's MAC, by its ifindex

	RouterEndpoint   = bpfRouterEndpoint
	RouterSource     = bpfRouterSource
	RouterSourceSlot = bpfRouterSourceSlot
	RouterMac        = bpfRouterMac
	RouterNode       = bpfRouterNode
	RouterConf       = bpfRouterConf

	Prefix = bpfNcPrefix // an LPM key: PrefixFrom

	PolicyPeer     = bpfPolPeer
	PolicyEndpoint = bpfPolEndpoint
	PolicyEntryKey = bpfPolEntryKey
	PolicyEntry    = bpfPolEntry
	PolicyDropKey  = bpfPolDropKey
	PolicyRevision = bpfPolRev

	QosPod    = bpfQosPod    // struct qos_pod: a pod's slice and rate bucket
	QosSlice  = bpfQosSlice  // struct qos_slice: what a slice's packets leave with
	QosBucket = bpfQosBucket // struct qos_bucket: a rate, paced by departure time
	QosClass  = bpfQosClass  // enum qos_class
	QosConf   = bpfQosConf   // struct qos_conf: how the uplinks queue
	QosMode   = bpfQosMode   // enum qos_mode

	LBNodePortMode = bpfLbNodeportMode // enum lb_nodeport_mode: the constant lb_nodeport
)

// The NodePort modes (enum lb_nodeport_mode).
const (
	LBNodePortSNAT   = bpfLbNodeportModeLB_NODEPORT_SNAT
	LBNodePortDSR    = bpfLbNodeportModeLB_NODEPORT_DSR
	LBNodePortHybrid = bpfLbNodeportModeLB_NODEPORT_HYBRID
)

// The slice classes (enum qos_class).
const (
	QosBestEffort = bpfQosClassQOS_BEST_EFFORT
	QosLatency    = bpfQosClassQOS_LATENCY
	QosThroughput = bpfQosClassQOS_THROUGHPUT
	QosDSCPKeep   = 0xff // QOS_DSCP_KEEP: the packet's own DSCP
	QosModeEDT    = bpfQosModeQOS_MODE_EDT
	QosModeHTB    = bpfQosModeQOS_MODE_HTB
)

// Enums of the maps, generated from the C (bpf2go -type): the names
// below only export them.
type (
	CTDir         = bpfCtDir         // enum ct_dir
	CTFlags       = bpfCtFlags       // enum ct_flags
	CTState       = bpfCtState       // enum ct_state
	CTStat        = bpfCtStat        // enum ct_stat
	CTGCResult    = bpfCtGcResult    // struct ct_gc_result
	NatIcmpStat   = bpfNatIcmpStat   // enum nat_icmp_stat
	ServiceFlags  = bpfLbSvcFlags    // enum lb_svc_flags
	Scope         = bpfLbScope       // enum lb_scope
	NodeAddrIndex = bpfNodeAddrIndex // enum node_addr_index
	RouterMode    = bpfRouterMode    // enum router_mode
	PolicyDir     = bpfPolDir        // enum pol_dir
	Identity      = bpfPolIdentity   // enum pol_identity
	EndpointFlags = bpfPolEndpointFlags
	DropReason    = bpfPolDropReason
	EntryBits     = bpfPolEntryBits // enum pol_entry_bits: a policy entry's prefix length
)

const (
	CTService = bpfCtDirCT_SERVICE
	CTReply   = bpfCtDirCT_REPLY
	CTPolicy  = bpfCtDirCT_POLICY // a connection NetworkPolicy judged

	CTExternal = bpfCtFlagsCT_F_EXTERNAL
	CTSNAT     = bpfCtFlagsCT_F_SNAT
	CTMasq     = bpfCtFlagsCT_F_MASQ
	CTHost     = bpfCtFlagsCT_F_HOST

	CTReplied     = bpfCtStateCT_ST_REPLIED
	CTEstablished = bpfCtStateCT_ST_ESTABLISHED
	CTHandshake   = bpfCtFlagsCT_F_HANDSHAKE
	CTClosing     = bpfCtStateCT_ST_CLOSING

	CTStatCreated      = bpfCtStatCT_STAT_CREATED
	CTStatClosed       = bpfCtStatCT_STAT_CLOSED
	CTStatInsertFailed = bpfCtStatCT_STAT_INSERT_FAILED
	CTStatEarlyDrop    = bpfCtStatCT_STAT_EARLY_DROP

	NatIcmpEchoMasq     = bpfNatIcmpStatNAT_ICMP_ECHO_MASQ
	NatIcmpEchoNoID     = bpfNatIcmpStatNAT_ICMP_ECHO_NO_ID
	NatIcmpErrXlated    = bpfNatIcmpStatNAT_ICMP_ERR_XLATED
	NatIcmpErrShort     = bpfNatIcmpStatNAT_ICMP_ERR_SHORT
	NatIcmpErrUntracked = bpfNatIcmpStatNAT_ICMP_ERR_UNTRACKED
	NatIcmpErrBad       = bpfNatIcmpStatNAT_ICMP_ERR_BAD
	NatIcmpStatMax      = bpfNatIcmpStatNAT_ICMP_STAT_MAX

	ServiceExternal     = bpfLbSvcFlagsLB_SVC_EXTERNAL
	ServiceLocal        = bpfLbSvcFlagsLB_SVC_LOCAL
	ServiceMaglev       = bpfLbSvcFlagsLB_SVC_MAGLEV
	ServiceSourceRanges = bpfLbSvcFlagsLB_SVC_SOURCE_RANGES
	ServiceAnnounce     = bpfLbSvcFlagsLB_SVC_ANNOUNCE
	ServiceTwoScopes    = bpfLbSvcFlagsLB_SVC_TWO_SCOPES
	ServiceScopeInt     = bpfLbSvcFlagsLB_SVC_SCOPE_INT
	// The views of a frontend (ServiceKey.Scope).
	ScopeExternal = bpfLbScopeLB_SCOPE_EXT
	ScopeInternal = bpfLbScopeLB_SCOPE_INT

	NodeAddrV4 = bpfNodeAddrIndexNODE_ADDR_V4
	NodeAddrV6 = bpfNodeAddrIndexNODE_ADDR_V6

	RouterNative = bpfRouterModeROUTER_NATIVE
	RouterVXLAN  = bpfRouterModeROUTER_VXLAN
	RouterKernel = bpfRouterModeROUTER_KERNEL

	PolicyIngress = bpfPolDirPOL_INGRESS
	PolicyEgress  = bpfPolDirPOL_EGRESS

	IdentityAnyPeer = bpfPolIdentityPOL_ANY_PEER
	IdentityHost    = bpfPolIdentityPOL_HOST
	IdentityWorld   = bpfPolIdentityPOL_WORLD

	IsolatedIngress = bpfPolEndpointFlagsPOL_ISOLATED_INGRESS
	IsolatedEgress  = bpfPolEndpointFlagsPOL_ISOLATED_EGRESS

	DropIngress = bpfPolDropReasonPOL_DROP_INGRESS
	DropEgress  = bpfPolDropReasonPOL_DROP_EGRESS

	// PolicyEntryBits is the prefix length of a policy entry's fixed part
	// (endpoint, direction, protocol, peer); + 16 bits: one port.
	PolicyEntryBits = bpfPolEntryBitsPOL_ENTRY_BITS
)

// AddrFrom converts an address into the datapath's 16-byte form (IPv4 as
// IPv4-mapped IPv6).
func AddrFrom(ip netip.Addr) Addr {
	b := ip.As16()
	var a Addr
	for i := range a.W {
		a.W[i] = binary.NativeEndian.Uint32(b[4*i:])
	}
	return a
}

// IP converts back, unmapping IPv4.
func (a bpfNcAddr) IP() netip.Addr {
	var b [16]byte
	for i, w := range a.W {
		binary.NativeEndian.PutUint32(b[4*i:], w)
	}
	return netip.AddrFrom16(b).Unmap()
}

// Port converts a host-order port into the network-order form of the maps.
func Port(p uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], p)
	return binary.NativeEndian.Uint16(b[:])
}

// HostPort converts a map port back into host order.
func HostPort(p uint16) uint16 { return Port(p) }

// Layouts of the single-entry configuration maps.
type (
	NodeConfig        = bpfNodeConfig
	SockDestroyTarget = bpfSockDestroyTarget
)

// PrefixFrom is p as an LPM key over the 16-byte form (IPv4 /n: 96+n).
func PrefixFrom(p netip.Prefix) Prefix {
	bits := p.Bits()
	if p.Addr().Is4() {
		bits += 96
	}
	return Prefix{Prefixlen: uint32(bits), Addr: AddrFrom(p.Masked().Addr())}
}

// Prefix converts an LPM key back.
func (k bpfNcPrefix) Prefix() netip.Prefix {
	a := k.Addr.IP()
	bits := int(k.Prefixlen)
	if a.Is4() {
		bits -= 96
	}
	return netip.PrefixFrom(a, bits)
}

// AgentSocketMark marks the agent's own sockets that may bind in the
// NodePort range on the node (its Services' health-check node ports):
// socket-LB's bind hook lets them (bpf/cubes/lb/sock.h).
const AgentSocketMark = bpfLbSockMarkLB_AGENT_SOCK_MARK
