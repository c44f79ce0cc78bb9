package datapath_test

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/datapath"
)

// BenchmarkAttachPod times attaching a pod's two tc programs to a fresh
// veth (as tcx links, each attach waited for an RCU grace period in the
// kernel, most of a CNI ADD; as tc filters, none). It prints ms per pod:
//
//	go test -run XXX -bench AttachPod ./pkg/datapath
func BenchmarkAttachPod(b *testing.B) {
	testenv.RequireRoot(b)
	testenv.EnsureBPFFS(b)
	pins := filepath.Join(datapath.BPFFS, testenv.Name("ncbench"))
	b.Cleanup(func() {
		if err := datapath.Unpin(pins); err != nil {
			b.Error(err)
		}
	})
	dp, err := loadTrusting(datapath.Config{PinDir: pins})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dp.Close() })
	var total time.Duration
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("ncb%d", i)
		if out, err := exec.Command("ip", "link", "add", name, "type", "veth", "peer", "name", name+"p").CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		ifc, err := net.InterfaceByName(name)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		err = dp.AttachPod(name, ifc.Index)
		total += time.Since(start)
		_ = exec.Command("ip", "link", "del", name).Run()
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/pod")
}
