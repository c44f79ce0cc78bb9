package ct

import (
	"fmt"
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Config is conntrack's lifecycle, as the agent's flags and config file
// give it (named after kube-proxy's conntrack settings). Each timeout
// counts from a flow's last packet, either way.
type Config struct {
	// TCPEstablished: an answered TCP flow (kube-proxy's
	// tcpEstablishedTimeout, 24 h).
	TCPEstablished metav1.Duration `json:"tcpEstablishedTimeout,omitempty"`
	// TCPClose: a TCP flow reset, or with FINs both ways whose last ACK
	// was not seen (Cilium's 10 s). A flow seen to its end leaves at once.
	TCPClose metav1.Duration `json:"tcpCloseTimeout,omitempty"`
	// TCPSyn: a TCP flow not yet answered.
	TCPSyn metav1.Duration `json:"tcpSynTimeout,omitempty"`
	// UDP: a UDP flow not yet answered (kube-proxy's udpTimeout, 30 s);
	// UDPStream: one answered (udpStreamTimeout, 300 s).
	UDP       metav1.Duration `json:"udpTimeout,omitempty"`
	UDPStream metav1.Duration `json:"udpStreamTimeout,omitempty"`
	// GCInterval: how often timed-out entries are removed.
	GCInterval metav1.Duration `json:"gcInterval,omitempty"`
	// EarlyDrop: a full table evicts its oldest flow not yet answered
	// for a new flow (netfilter's early drop), so that a flood of
	// spoofed SYNs cannot refuse new flows; off, a full table refuses
	// every new flow until entries time out (for measurement).
	EarlyDrop bool `json:"earlyDrop"`
}

// Defaults are kube-proxy's timeouts where it has them.
func Defaults() Config {
	d := func(t time.Duration) metav1.Duration { return metav1.Duration{Duration: t} }
	return Config{
		TCPEstablished: d(24 * time.Hour),
		TCPClose:       d(10 * time.Second),
		TCPSyn:         d(60 * time.Second),
		UDP:            d(30 * time.Second),
		UDPStream:      d(300 * time.Second),
		GCInterval:     d(10 * time.Second),
		EarlyDrop:      true,
	}
}

// Variables are the datapath's constants for c (bpf/cubes/ct/ct_maps.h),
// set when the object is loaded; an out-of-range timeout is an error
// naming its field.
func (c Config) Variables() (map[string]any, error) {
	vars := map[string]any{}
	for _, t := range []struct {
		field, variable string
		d               time.Duration
	}{
		{"tcpEstablishedTimeout", "ct_timeout_tcp", c.TCPEstablished.Duration},
		{"tcpCloseTimeout", "ct_timeout_close", c.TCPClose.Duration},
		{"tcpSynTimeout", "ct_timeout_syn", c.TCPSyn.Duration},
		{"udpTimeout", "ct_timeout_udp", c.UDP.Duration},
		{"udpStreamTimeout", "ct_timeout_udp_stream", c.UDPStream.Duration},
	} {
		if t.d < time.Second || t.d%time.Second != 0 || t.d/time.Second > math.MaxUint32 {
			return nil, fmt.Errorf("conntrack %s: %s is not a whole number of seconds from 1s to %ds", t.field, t.d, uint32(math.MaxUint32))
		}
		vars[t.variable] = uint32(t.d / time.Second)
	}
	vars["ct_early_drop"] = uint8(0)
	if c.EarlyDrop {
		vars["ct_early_drop"] = uint8(1)
	}
	if c.GCInterval.Duration < time.Second {
		return nil, fmt.Errorf("conntrack gcInterval: %s is under a second", c.GCInterval.Duration)
	}
	return vars, nil
}
