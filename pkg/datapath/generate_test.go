package datapath_test

import (
	"testing"

	"github.com/netcube/netcube/internal/testenv"
)

// TestGeneratedUpToDate: bpf_bpfel.{go,o} are what bpf/ generates.
func TestGeneratedUpToDate(t *testing.T) { testenv.BPFObjectUpToDate(t, "datapath") }
