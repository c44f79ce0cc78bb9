package bench

// bench scale-l2's reading of the hollow agents' election (their
// netcube_l2_* metrics), and the kill: one agent stopped dead, and how
// long until the others agreed on who announces its addresses.

import (
	"bufio"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// agentL2 is one scrape of an agent's election metrics (all zero when it
// runs none, or did not answer).
type agentL2 struct {
	ok                      bool
	alive, announcing       float64
	changes, changedAt      float64
	takeovers, lastTakeover float64
	sent, accepted, refused float64
}

var l2Metric = map[string]func(*agentL2) *float64{
	"netcube_l2_alive_nodes":                     func(a *agentL2) *float64 { return &a.alive },
	"netcube_l2_announcing":                      func(a *agentL2) *float64 { return &a.announcing },
	"netcube_l2_alive_changes_total":             func(a *agentL2) *float64 { return &a.changes },
	"netcube_l2_alive_changed_timestamp_seconds": func(a *agentL2) *float64 { return &a.changedAt },
	"netcube_l2_takeovers_total":                 func(a *agentL2) *float64 { return &a.takeovers },
	"netcube_l2_last_takeover_timestamp_seconds": func(a *agentL2) *float64 { return &a.lastTakeover },
	"netcube_l2_heartbeats_sent_total":           func(a *agentL2) *float64 { return &a.sent },
	"netcube_l2_heartbeats_accepted_total":       func(a *agentL2) *float64 { return &a.accepted },
	"netcube_l2_heartbeats_refused_total":        func(a *agentL2) *float64 { return &a.refused },
}

func scrapeAgentL2(addr string) agentL2 {
	var a agentL2
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return a
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if f := l2Metric[name]; ok && f != nil {
			*f(&a), _ = strconv.ParseFloat(value, 64)
		}
	}
	a.ok = sc.Err() == nil
	return a
}

// scrapeL2 scrapes every agent (nil ones, the killed, stay zero), eight
// at a time: a round over a hundred niced agents must not take seconds.
func scrapeL2(agents []*hollowAgent) []agentL2 {
	out := make([]agentL2, len(agents))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, a := range agents {
		if a == nil || a.hasExited() {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			out[i] = scrapeAgentL2(a.metrics)
			<-sem
		})
	}
	wg.Wait()
	return out
}

// l2Agree: every agent answering counts alive alive nodes and together
// they announce want addresses. Electing from equal views, no two
// announce one address; an agent behind (resync not done) announces a
// subset of its share, so the sum is want only once every agent is done.
func l2Agree(got []agentL2, alive, want int) bool {
	sum, answering := 0, 0
	for _, a := range got {
		if !a.ok {
			continue
		}
		answering++
		if int(a.alive) != alive {
			return false
		}
		sum += int(a.announcing)
	}
	return answering == alive && sum == want
}

// l2Summary says how far the agents are from agreeing.
func l2Summary(got []agentL2, want int) string {
	views := map[int]int{}
	sum, answering := 0, 0
	for _, a := range got {
		if a.ok {
			answering++
			views[int(a.alive)]++
			sum += int(a.announcing)
		}
	}
	return fmt.Sprintf("%d agents answer; alive-node counts seen (count: agents) %v; %d addresses announced, want %d", answering, views, sum, want)
}

// l2KillOne kills the middle agent and measures until the others agree.
func l2KillOne(cfg ScaleL2Config, agents []*hollowAgent, n int) (*L2Kill, error) {
	victim := n / 2
	before := scrapeL2(agents)
	k := &L2Kill{Node: hollowNode(victim), Announced: int(before[victim].announcing),
		Expected: l2Expected(cfg.Services, cfg.Agents[len(cfg.Agents)-1], n, victim)}
	takeovers0 := 0.0
	for i, a := range before {
		if i != victim {
			takeovers0 += a.takeovers
		}
	}
	fmt.Fprintf(cfg.Log, "   killing %s (announcing %d addresses)\n", k.Node, k.Announced)
	killed := time.Now()
	if err := agents[victim].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return k, fmt.Errorf("kill %s: %w", k.Node, err)
	}
	<-agents[victim].exited
	var got []agentL2
	k.Agreed = waitUntil(2*time.Minute, 100*time.Millisecond, func() bool {
		got = scrapeL2(agents)
		return l2Agree(got, n-1, k.Expected)
	})
	k.AgreedS = time.Since(killed).Seconds()
	at := float64(killed.UnixNano()) / 1e9
	first, last, lastTake, takeovers := math.Inf(1), 0.0, 0.0, 0.0
	for i, a := range got {
		if i == victim || !a.ok {
			continue
		}
		takeovers += a.takeovers
		if a.changedAt >= at {
			first, last = min(first, a.changedAt-at), max(last, a.changedAt-at)
		}
		if a.lastTakeover >= at {
			lastTake = max(lastTake, a.lastTakeover-at)
		}
	}
	if math.IsInf(first, 1) {
		first = 0
	}
	k.FirstSawS, k.AllSawS, k.LastTakeS, k.Moved = first, last, lastTake, int(takeovers-takeovers0)
	fmt.Fprintf(cfg.Log, "   %d addresses moved; dead to the first agent after %.2f s, to all after %.2f s; last takeover %.2f s; agreement seen at %.2f s\n",
		k.Moved, k.FirstSawS, k.AllSawS, k.LastTakeS, k.AgreedS)
	if !k.Agreed {
		return k, fmt.Errorf("after killing %s the other %d agents did not agree within 2m: %s", k.Node, n-1, l2Summary(got, k.Expected))
	}
	return k, nil
}
