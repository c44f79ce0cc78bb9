package ct

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netcube/netcube/pkg/datapath"
)

// Earlier layouts of struct ct_entry, by size.
const (
	// v1Size: netcube before the lifecycle: bytes 8-16 were the flow's
	// creation time, and there was no state; the rest as now.
	v1Size = 40
)

// upgradeEntry turns a ct_flows value of an earlier agent into the
// current layout (cube.MapSpec.Upgrade). An entry of the first layout
// becomes a flow seen just now and answered: its real state is unknown,
// and "answered" gives it the long timeout of an established flow (a
// flow that was not is forgotten a day later rather than a minute).
func upgradeEntry(old []byte) ([]byte, bool) {
	size := int(unsafe.Sizeof(datapath.CTEntry{}))
	switch len(old) {
	case size:
		return old, true
	case v1Size:
		v := make([]byte, size)
		copy(v, old)
		binary.NativeEndian.PutUint64(v[8:], Now())
		binary.NativeEndian.PutUint64(v[40:], uint64(datapath.CTReplied))
		return v, true
	}
	return nil, false
}

// Now is the datapath's clock (bpf_ktime_get_coarse_ns:
// CLOCK_MONOTONIC_COARSE, bpf/lib/common.h's nc_now), in nanoseconds:
// what an entry's last_ns is compared with.
func Now() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC_COARSE, &ts)
	return uint64(ts.Nano())
}
