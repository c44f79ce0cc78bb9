package l2announce

import (
	"encoding/binary"
	"errors"
)

// Heartbeat is what a node sends every Interval: its node name, and a
// sequence number (which says, in a capture, how many were lost).
//
// On the wire: "NCHB", a version byte (1), the sequence number (8 bytes,
// big endian), the name's length (1 byte) and the name (a Node's name is
// a DNS subdomain: at most 253 bytes).
type Heartbeat struct {
	Node string
	Seq  uint64
}

const (
	heartbeatMagic   = "NCHB"
	heartbeatVersion = 1
	heartbeatHeader  = len(heartbeatMagic) + 1 + 8 + 1
	maxNodeName      = 253
)

var errHeartbeat = errors.New("not a netcube heartbeat")

// Marshal encodes h; a name longer than a Node's can be is an error.
func (h Heartbeat) Marshal() ([]byte, error) {
	if h.Node == "" || len(h.Node) > maxNodeName {
		return nil, errors.New("heartbeat: node name empty or longer than 253 bytes")
	}
	b := make([]byte, 0, heartbeatHeader+len(h.Node))
	b = append(b, heartbeatMagic...)
	b = append(b, heartbeatVersion)
	b = binary.BigEndian.AppendUint64(b, h.Seq)
	b = append(b, byte(len(h.Node)))
	return append(b, h.Node...), nil
}

// ParseHeartbeat decodes a heartbeat; anything else is an error.
func ParseHeartbeat(b []byte) (Heartbeat, error) {
	if len(b) < heartbeatHeader || string(b[:4]) != heartbeatMagic || b[4] != heartbeatVersion {
		return Heartbeat{}, errHeartbeat
	}
	n := int(b[13])
	if n == 0 || len(b) != heartbeatHeader+n {
		return Heartbeat{}, errHeartbeat
	}
	return Heartbeat{Seq: binary.BigEndian.Uint64(b[5:13]), Node: string(b[heartbeatHeader:])}, nil
}
