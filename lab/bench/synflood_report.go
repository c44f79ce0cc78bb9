package bench

import (
	"fmt"
	"math"
	"strings"
)

// Write writes synflood.json, synflood.md and plots/synflood.svg under dir.
func (r *SynFloodReport) Write(dir string) error {
	return writeReportFiles(dir, "synflood", r, r.Markdown(), r.svg())
}

func earlyDropName(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// Markdown renders the report: a row per flood, then what it shows.
func (r *SynFloodReport) Markdown() string {
	var b strings.Builder
	b.WriteString("# SYN flood: conntrack's early drop\n\n")
	fmt.Fprintf(&b, "Measured at netcube commit `%s` on %s, %s, by `%s`.\n\n", r.Commit, r.MeasuredAt.Format("2006-01-02"), r.Machine, r.Command)
	fmt.Fprintf(&b, "A host outside the cluster sends %g TCP SYNs a second, each from a spoofed source of its own in 198.18.0.0/15, "+
		"for %.0f s to a NodePort (`externalTrafficPolicy: Local`) on node1, whose conntrack holds %d entries: each flood flow would hold two "+
		"for the 60 s SYN timeout, so the table is full after %.1f s. Before the flood, the same host opened %d connections to the NodePort; "+
		"each is checked (a request and its answer) once a second during the flood and at its end. During the flood it opens a new "+
		"connection every %.1f s (1 s timeout). Early drop off (`--conntrack-early-drop=false`) and on (the default) alternate, each "+
		"in a sandbox of its own.\n\n", r.Rate, r.DurationS, r.TableSize, float64(r.TableSize)/2/r.Rate, r.HeldConns, r.NewEveryS)
	b.WriteString("| run | early drop | SYNs sent | held at the end | held lost (most during) | new connections | failed | new p50 ms | new p99 ms | flows evicted | flows not written |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range r.Results {
		fmt.Fprintf(&b, "| %d | %s | %d | %d/%d | %d (%d) | %d | %d | %.2f | %.2f | %d | %d |\n", x.Run, earlyDropName(x.EarlyDrop), x.Sent,
			x.Held, r.HeldConns, x.HeldLost, x.HeldLostMax, x.New, x.NewFailed, x.NewP50Ms, x.NewP99Ms, x.EarlyDrops, x.InsertFailed)
	}
	for _, on := range []bool{true, false} {
		lost, failed, conns := 0, 0, 0
		for _, x := range r.Results {
			if x.EarlyDrop == on {
				lost, failed, conns = lost+x.HeldLostMax, failed+x.NewFailed, conns+x.New
			}
		}
		fmt.Fprintf(&b, "\nEarly drop %s: established connections lost **%d**; new connections failed **%d of %d**.", earlyDropName(on), lost, failed, conns)
	}
	b.WriteString("\n\nFlows evicted: conntrack entries given up for a new flow (the oldest flows never answered from both sides, " +
		"never an established one); not written: a new flow that found the table full with nothing to give up, whose packet is dropped " +
		"(`netcube_conntrack_insert_failures_total`).\n\n![new connections served a second](plots/synflood.svg)\n")
	return b.String()
}

// svg plots, second by second of each mode's first run, the new
// connections served and the held connections answering.
func (r *SynFloodReport) svg() string {
	var xs []int
	var ss []series
	for _, on := range []bool{false, true} {
		for _, x := range r.Results {
			if x.EarlyDrop != on {
				continue
			}
			newOK, held := make([]float64, len(x.PerSecond)), make([]float64, len(x.PerSecond))
			for i, s := range x.PerSecond {
				newOK[i], held[i] = float64(s.NewOK), float64(s.Held)
				if s.Held == 0 && s.Second == 0 {
					held[i] = math.NaN() // the first check is a second in
				}
			}
			if len(xs) < len(x.PerSecond) {
				xs = xs[:0]
				for _, s := range x.PerSecond {
					xs = append(xs, s.Second)
				}
			}
			ss = append(ss, series{name: "new served/s, early drop " + earlyDropName(on), ys: newOK, dashed: !on},
				series{name: "held answering, early drop " + earlyDropName(on), ys: held, dashed: !on})
			break
		}
	}
	for i := range ss { // every series as long as the x axis
		for len(ss[i].ys) < len(xs) {
			ss[i].ys = append(ss[i].ys, math.NaN())
		}
	}
	return svgPlot(fmt.Sprintf("SYN flood, %g SYNs/s, %d conntrack entries", r.Rate, r.TableSize), "seconds into the flood", xs, ss)
}
