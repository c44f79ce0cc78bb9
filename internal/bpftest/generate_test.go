package bpftest

import (
	"testing"

	"github.com/netcube/netcube/internal/testenv"
)

// TestGeneratedUpToDate: bpf_bpfel.{go,o} are what bpf/test generates.
func TestGeneratedUpToDate(t *testing.T) { testenv.BPFObjectUpToDate(t, "bpftest") }
