package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/lab/traffic"
)

// bulk runs iperf3 from a pod (or the external client) for d with streams
// parallel streams and returns the received Gbit/s; src, if set, is the
// address to send from.
func bulk(sb *sandbox.Sandbox, from, host string, port, streams int, src string, d time.Duration) (float64, error) {
	args := []string{"-c", host, "-p", strconv.Itoa(port), "-t", strconv.Itoa(max(1, int(d.Seconds()))), "-P", strconv.Itoa(streams), "-A", "0", "-J"}
	if src != "" {
		args = append(args, "-B", src)
	}
	out, err := runIn(sb, from, exec.Command("iperf3", args...))
	var ip struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
		Error string `json:"error"`
	}
	if jerr := json.Unmarshal(out, &ip); jerr != nil || ip.Error != "" {
		return 0, fmt.Errorf("iperf3 to %s from %s: %v %v %s", host, from, err, jerr, ip.Error)
	}
	return ip.End.SumReceived.BitsPerSecond / 1e9, nil
}

// requests runs `netcube-lab pod load` in the client pod, pinned to CPU 1 with
// the server: one request at a time for d, on one connection (persistent)
// or a new connection each (so latency is the time to first byte).
func requests(sb *sandbox.Sandbox, bin, from, addr string, persistent bool, src string, d time.Duration) (traffic.Summary, error) {
	args := []string{"pod", "load", "--duration", d.String(), "--persistent=" + strconv.FormatBool(persistent)}
	if src != "" {
		args = append(args, "--source", src)
	}
	var s traffic.Summary
	out, err := runIn(sb, from, pinned(1, filepath.Join(bin, sandbox.LabBinary), append(args, addr)...))
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(out, &s); err != nil {
		return s, fmt.Errorf("load output %q: %w", out, err)
	}
	return s, nil
}

// answer is one request of a backend watch, with the time it came back.
type answer struct {
	traffic.Result
	at time.Time
}

// watch sends requests to addr from the client pod, a new connection each,
// until stop is called, delivering every answer as it comes.
func (c *cluster) watch(addr string) (<-chan answer, func(), error) {
	cmd := exec.Command(filepath.Join(c.binDir, sandbox.LabBinary), "pod", "request", "--count", "0", "--timeout", "300ms", addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := c.sb.Start(c.client.Name, cmd); err != nil {
		return nil, nil, err
	}
	ch := make(chan answer, 1024)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var r traffic.Result
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				ch <- answer{r, time.Now()}
			}
		}
	}()
	stop := func() {
		_ = cmd.Process.Kill()
		for range ch { // drain until the reader is done
		}
		_ = cmd.Wait()
	}
	return ch, stop, nil
}

// reaction scales the churn Service from {r1} up to {r1, r2} and back,
// timing each change from the API write to the traffic following it:
// up, until r2 answers a first time; down, until r2 answers a last time
// (200 answers in a row without r2 close the watch).
func (c *cluster) reaction(f family, timeout time.Duration) (up, down time.Duration, err error) {
	ch, stop, err := c.watch(hostPort(f.churn, churnPort))
	if err != nil {
		return 0, 0, err
	}
	defer stop()
	next := func(deadline time.Time) (answer, error) {
		select {
		case a, ok := <-ch:
			if !ok {
				return a, fmt.Errorf("request stream to %s ended", f.churn)
			}
			return a, nil
		case <-time.After(time.Until(deadline)):
			return answer{}, fmt.Errorf("no answer from %s for %s", f.churn, timeout)
		}
	}
	// Traffic flows before the change.
	if _, err := next(time.Now().Add(timeout)); err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	if err := c.setChurnEndpoints(f, c.r1, c.r2); err != nil {
		return 0, 0, err
	}
	for deadline := t0.Add(timeout); ; {
		a, err := next(deadline)
		if err != nil {
			return 0, 0, fmt.Errorf("scale up: %w", err)
		}
		if a.Backend == c.r2.Name && a.at.After(t0) {
			up = a.at.Sub(t0)
			break
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("scale up: %s never answered in %s", c.r2.Name, timeout)
		}
	}
	t0 = time.Now()
	if err := c.setChurnEndpoints(f, c.r1); err != nil {
		return 0, 0, err
	}
	last, without := t0, 0
	for deadline := t0.Add(timeout); without < 200; {
		a, err := next(deadline)
		if err != nil {
			return 0, 0, fmt.Errorf("scale down: %w", err)
		}
		if a.Backend == c.r2.Name {
			last, without = a.at, 0
		} else if a.Err == "" {
			without++
		}
	}
	return up, last.Sub(t0), nil
}

// churn replaces the churn Service's one endpoint every period for d, as a
// rolling update does (the new replica's server starts and it becomes the
// endpoint; the old replica's server is killed as its pod is deleted),
// while the client sends requests on new connections. Client errors count
// connections the data plane still sent to a deleted replica.
func (c *cluster) churn(f family, d, period time.Duration) (traffic.Summary, error) {
	type result struct {
		s   traffic.Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := requests(c.sb, c.binDir, c.client.Name, hostPort(f.churn, churnPort), false, "", d)
		done <- result{s, err}
	}()
	cur, next := c.r1, c.r2
	var stepErr error
	for t := time.NewTicker(period); ; {
		select {
		case r := <-done:
			t.Stop()
			// Back to the start: r1 the endpoint, both servers up.
			if !c.serverUp(cur) {
				stepErr = firstErr(stepErr, c.startServer(cur))
			}
			if !c.serverUp(next) {
				stepErr = firstErr(stepErr, c.startServer(next))
			}
			stepErr = firstErr(stepErr, c.setChurnEndpoints(f, c.r1))
			if r.err != nil {
				return r.s, r.err
			}
			return r.s, stepErr
		case <-t.C:
			if stepErr != nil {
				continue
			}
			if err := c.startServer(next); err != nil {
				stepErr = err
				continue
			}
			if err := c.setChurnEndpoints(f, next); err != nil {
				stepErr = err
				continue
			}
			stepErr = c.sb.StopServer(cur.Name)
			cur, next = next, cur
		}
	}
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func (c *cluster) serverUp(p sandbox.Pod) bool {
	return c.answers(hostPort(p.IP4.String(), sandbox.PodPort), p.Name)
}

// startServer starts a replica's server unless it runs, and waits until it
// answers (a readiness probe).
func (c *cluster) startServer(p sandbox.Pod) error {
	if c.serverUp(p) {
		return nil
	}
	if err := c.sb.StartServer(p.Name); err != nil {
		return err
	}
	if !waitUntil(5*time.Second, 5*time.Millisecond, func() bool { return c.serverUp(p) }) {
		return fmt.Errorf("server in %s does not answer", p.Name)
	}
	return nil
}
