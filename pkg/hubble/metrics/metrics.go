package metrics

import (
	"context"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netcube/netcube/pkg/events"
	"github.com/netcube/netcube/pkg/hubble"
	"github.com/netcube/netcube/pkg/hubble/flowpb"
)

// Metrics counts events as Hubble's metrics. Count runs on one goroutine
// (Run's); Collect may run at any time beside it.
type Metrics struct {
	flows, drops, tcpFlags, verdicts, ports *prometheus.CounterVec
	vecs                                    []*prometheus.CounterVec

	// The counters of each label set, made the first time it is counted
	// (a label set never counted is not shown, as Cilium's).
	flowCounters   [nProtocols][nKinds][nSubtypes]prometheus.Counter
	dropCounters   map[dropKey]prometheus.Counter
	tcpCounters    [nFlags][2]prometheus.Counter
	policyCounters [2][nMatches][2]prometheus.Counter
	portCounters   map[uint32]prometheus.Counter // protocol<<16 | port
}

type dropKey struct {
	reason   flowpb.DropReason
	protocol protocol
}

// New returns the metrics named (see Parse), none counted yet.
func New(names []string) (*Metrics, error) {
	names, err := Parse(names)
	if err != nil {
		return nil, err
	}
	m := &Metrics{dropCounters: map[dropKey]prometheus.Counter{}, portCounters: map[uint32]prometheus.Counter{}}
	vec := func(name, help string, labels ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "hubble", Name: name, Help: help}, labels)
		m.vecs = append(m.vecs, v)
		return v
	}
	for _, n := range names {
		switch n {
		case Flow:
			m.flows = vec("flows_processed_total", "Total number of flows processed", "protocol", "type", "subtype", "verdict")
		case Drop:
			m.drops = vec("drop_total", "Number of drops", "reason", "protocol")
		case TCP:
			m.tcpFlags = vec("tcp_flags_total", "TCP flag occurrences", "flag", "family")
		case Policy:
			m.verdicts = vec("policy_verdicts_total", "Total number of Cilium network policy verdicts", "direction", "match", "action")
		case PortDistribution:
			m.ports = vec("port_distribution_total", "Numbers of packets distributed by destination port", "protocol", "port")
		}
	}
	return m, nil
}

// Describe describes the metrics asked for.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range m.vecs {
		v.Describe(ch)
	}
}

// Collect collects the metrics asked for.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, v := range m.vecs {
		v.Collect(ch)
	}
}

// subscriberBuffer is how many events the counting may be behind the
// datapath before it loses some (netcube_monitor_subscriber_lost_total
// counts them): never blocking the reader of the ring buffer.
const subscriberBuffer = 8192

// Run counts hub's events until ctx ends; it returns at once.
func (m *Metrics) Run(ctx context.Context, hub *events.Hub) {
	sub := hub.Subscribe(subscriberBuffer)
	go func() {
		<-ctx.Done()
		sub.Close()
	}()
	go func() {
		for e := range sub.C {
			m.Count(&e)
		}
	}()
}

// Count counts one event as each metric counts the flow the Hubble server
// makes of it (hubble.Flow); a policy drop also counts as a policy verdict
// (see policy).
func (m *Metrics) Count(e *events.Event) {
	k := kindOf(e)
	p := protocolOf(e.Proto)
	if m.flows != nil {
		m.countFlow(e, k, p)
	}
	if m.drops != nil && k == kindDrop {
		m.countDrop(e, p)
	}
	// TCP flags and ports: of forwarded flows only, as Cilium's.
	forwarded := k == kindPolicyVerdict || k == kindRoute
	if m.tcpFlags != nil && forwarded && p == protoTCP {
		m.countTCPFlags(e)
	}
	if m.verdicts != nil && e.Policy != nil && (k == kindPolicyVerdict || k == kindDrop) {
		m.countPolicy(e, k)
	}
	if m.ports != nil && forwarded && p != protoUnknown {
		m.countPort(e, p)
	}
}

func (m *Metrics) countFlow(e *events.Event, k kind, p protocol) {
	sub := 0
	if k >= kindRoute {
		sub = subtypeOf(e, k)
	}
	c := &m.flowCounters[p][k][sub]
	if *c == nil {
		subtype := ""
		if k >= kindRoute {
			subtype = traceSubtypes[sub]
		}
		*c = m.flows.WithLabelValues(protocolNames[p], kinds[k].typeName, subtype, kinds[k].verdict.String())
	}
	(*c).Inc()
}

func (m *Metrics) countDrop(e *events.Event, p protocol) {
	key := dropKey{hubble.DropReason(e.Drop), p}
	c, ok := m.dropCounters[key]
	if !ok {
		c = m.drops.WithLabelValues(key.reason.String(), protocolNames[p])
		m.dropCounters[key] = c
	}
	c.Inc()
}

// The flags Cilium's tcp handler counts: FIN, SYN, SYN-ACK, RST.
type flag uint8

const (
	flagFIN flag = iota
	flagSYN
	flagSYNACK
	flagRST
	nFlags
)

var flagNames = [nFlags]string{"FIN", "SYN", "SYN-ACK", "RST"}

func (m *Metrics) countTCPFlags(e *events.Event) {
	if e.TCPFlags == "" {
		return
	}
	family := 0 // IPv4, as the flow says of any event not of family 6
	if e.Family == 6 {
		family = 1
	}
	// events.Event names the flags SYN, ACK, FIN, RST, PSH: none is part of another.
	has := func(f string) bool { return strings.Contains(e.TCPFlags, f) }
	inc := func(f flag) {
		c := &m.tcpCounters[f][family]
		if *c == nil {
			*c = m.tcpFlags.WithLabelValues(flagNames[f], [2]string{"IPv4", "IPv6"}[family])
		}
		(*c).Inc()
	}
	if has("FIN") {
		inc(flagFIN)
	}
	if has("SYN") {
		if has("ACK") {
			inc(flagSYNACK)
		} else {
			inc(flagSYN)
		}
	}
	if has("RST") {
		inc(flagRST)
	}
}

func (m *Metrics) countPort(e *events.Event, p protocol) {
	port := uint32(0) // ICMP: Cilium's port 0
	if p == protoTCP || p == protoUDP || p == protoSCTP {
		port = uint32(e.Dst.Port())
	}
	key := uint32(p)<<16 | port
	c, ok := m.portCounters[key]
	if !ok {
		c = m.ports.WithLabelValues(protocolNames[p], strconv.FormatUint(uint64(port), 10))
		m.portCounters[key] = c
	}
	c.Inc()
}
