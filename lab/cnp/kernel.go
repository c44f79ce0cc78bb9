package cnp

import "golang.org/x/sys/unix"

// KernelHasSCTP is whether this machine's kernel makes SCTP sockets (the
// suite's SCTP probes and servers need them; the report's environment
// says which).
func KernelHasSCTP() bool {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP)
	if err != nil {
		return false
	}
	_ = unix.Close(fd)
	return true
}
