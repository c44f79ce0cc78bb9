package datapath_test

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/monitor"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// irqWork reads this machine's IRQ work interrupts on cpu
// (/proc/interrupts, IWI): how a ring buffer record wakes its reader.
func irqWork(t *testing.T, cpu int) uint64 {
	t.Helper()
	f, err := os.Open("/proc/interrupts")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > cpu+1 && fields[0] == "IWI:" {
			n, err := strconv.ParseUint(fields[cpu+1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no IWI line in /proc/interrupts: this kernel does not count IRQ work")
	return 0
}

// TestRingWakesReaderOnce: the datapath's events wake a sleeping reader
// once the data waiting crosses the mark (64 KiB), not before; and while
// more than the mark waits unread (a reader that fell behind), a record
// raises no wake-up of its own (an IRQ work interrupt each, ~0.7 µs).
func TestRingWakesReaderOnce(t *testing.T) {
	dp, tables := load(t)
	apply(t, tables, model.FrontendBackends{Frontend: frontend(vip6, model.TCP)}) // no endpoints: each SYN a drop event
	if err := monitor.SetFlags(dp.Maps(), datapath.MonFlagDrops); err != nil {
		t.Fatal(err)
	}
	// Every record is written on CPU 0, where its IRQ work is counted.
	defer testenv.OnCPU(t, 0)()
	recBytes := (int(unsafe.Sizeof(datapath.MonEvent{})) + unix.BPF_RINGBUF_HDR_SZ + 7) &^ 7 // an event and its header
	drop := pkt.TCP(client6, vip6, syn, nil)
	events := func(n int) {
		t.Helper()
		for range n {
			if v := runProg(t, dp.Programs().FromPod, drop); v != actRedirect {
				t.Fatalf("the SYN to a Service without endpoints: verdict %d, want its RST sent back", v)
			}
		}
	}
	e := readEvents(t, dp)
	woken := make(chan error, 1)
	sleep := func() {
		e.rd.SetDeadline(time.Now().Add(10 * time.Second))
		go func() { _, err := e.rd.Read(); woken <- err }()
		time.Sleep(300 * time.Millisecond) // asleep in epoll by now
	}
	awake := func(within time.Duration) bool {
		select {
		case err := <-woken:
			if err != nil {
				t.Fatalf("the reader woke with %v", err)
			}
			return true
		case <-time.After(within):
			return false
		}
	}

	crossing := 64*1024/recBytes + 1 // the records that cross the mark
	below := 60 * 1024 / recBytes
	// Positive control: a sleeping reader wakes when the records cross
	// the mark in one go.
	sleep()
	events(crossing)
	if !awake(2 * time.Second) {
		t.Fatal("the reader was not woken once the data waiting crossed the mark")
	}
	e.drain(t)
	// Below the mark it sleeps on; the record that crosses it wakes it.
	sleep()
	events(below)
	if awake(300 * time.Millisecond) {
		t.Fatal("the reader was woken with less than the mark waiting")
	}
	events(crossing - below)
	if !awake(2 * time.Second) {
		t.Fatal("the reader was not woken once the data waiting crossed the mark")
	}
	// Past the mark, unread: no record raises a wake-up.
	before := irqWork(t, 0)
	events(500)
	// A wake-up each would be 500; the machine's other IRQ work (perf,
	// RCU, printk) is a few.
	if n := irqWork(t, 0) - before; n >= 250 {
		t.Errorf("500 records past the mark raised %d IRQ work interrupts: a wake-up each", n)
	}
	e.drain(t)
}
