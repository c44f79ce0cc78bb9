module github.com/netcube/netcube

go 1.26.8

require (
	github.com/cilium/ebpf v0.22.0
	github.com/gopacket/gopacket v1.7.7
	golang.org/x/sys v0.45.0
)

tool github.com/cilium/ebpf/cmd/bpf2go
