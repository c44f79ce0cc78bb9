package datapath

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// BPFFS is where pins live.
const BPFFS = "/sys/fs/bpf"

// EnsureBPFFS mounts bpffs at /sys/fs/bpf unless it already is.
func EnsureBPFFS() error {
	var st unix.Statfs_t
	if err := unix.Statfs(BPFFS, &st); err == nil && st.Type == unix.BPF_FS_MAGIC {
		return nil
	}
	if err := unix.Mount("bpf", BPFFS, "bpf", 0, ""); err != nil {
		return fmt.Errorf("mount bpffs at %s: %w", BPFFS, err)
	}
	return nil
}
