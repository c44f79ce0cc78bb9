package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/datapath"
)

// A peer is one Service data plane on the measured node: netcube, or the
// real kube-proxy in one of its modes. Only one runs at a time; stop
// removes everything it installed, so the next starts from a clean node.
type peer interface {
	name() string
	start() error
	stop() error
	// entries counts what the data plane holds for the Services: iptables
	// or nftables rules (with map elements), or BPF map entries.
	entries() (int, error)
	// pid of the proxy process, for its CPU time and peak memory.
	pid() int
	// ordered: the data plane matches Services in a rule order, which
	// place can change.
	ordered() bool
	// place moves the rules of the given ClusterIPs first or last in the
	// order packets are matched against.
	place(vips []string, first bool) error
}

// netcubePeer is netcube's agent on the node.
type netcubePeer struct {
	sb   *sandbox.Sandbox
	node sandbox.Node
	// logFrom is the agent log's length when this start began: the log is
	// appended to by every start on the node.
	logFrom int64
}

func (p *netcubePeer) name() string { return "netcube" }

// start starts the agent on empty maps: a full sync from scratch.
func (p *netcubePeer) start() error {
	if err := p.sb.RemoveDatapath(p.node.Name); err != nil {
		return err
	}
	p.logFrom = 0
	if fi, err := os.Stat(p.sb.AgentLog(p.node.Name)); err == nil {
		p.logFrom = fi.Size()
	}
	return p.sb.StartAgent(p.node.Name)
}

// syncSplit is where the full sync from start to served went, from what
// this start's agent logged.
func (p *netcubePeer) syncSplit(start, served time.Time) (*FullSyncSplit, error) {
	b, err := os.ReadFile(p.sb.AgentLog(p.node.Name))
	if err != nil {
		return nil, err
	}
	if p.logFrom > int64(len(b)) {
		return nil, fmt.Errorf("%s shrank since the agent started", p.sb.AgentLog(p.node.Name))
	}
	s, err := parseAgentSync(b[p.logFrom:])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.sb.AgentLog(p.node.Name), err)
	}
	if s.loaded.IsZero() {
		return nil, fmt.Errorf("%s: no \"datapath loaded\" before the initial sync", p.sb.AgentLog(p.node.Name))
	}
	firstObject := s.applied.Add(-s.wall)
	listed := s.applied.Add(-s.apply)
	return &FullSyncSplit{
		LoadS:        s.loaded.Sub(start).Seconds(),
		FirstObjectS: firstObject.Sub(s.loaded).Seconds(),
		ListsS:       listed.Sub(firstObject).Seconds(),
		ApplyS:       s.apply.Seconds(),
		ServedS:      served.Sub(s.applied).Seconds(),
		Phases:       s.split,
	}, nil
}

// stop stops the agent and takes its programs off the node.
func (p *netcubePeer) stop() error {
	if err := p.sb.StopAgent(p.node.Name, false); err != nil {
		return err
	}
	return p.sb.RemoveDatapath(p.node.Name)
}

func (p *netcubePeer) entries() (int, error) {
	maps, closeMaps, err := datapath.OpenPinned(p.node.PinDir)
	if err != nil {
		return 0, err
	}
	defer closeMaps()
	n := 0
	for _, name := range []string{lb.MapServices, lb.MapBackends, lb.MapRevNAT} {
		var k, v []byte
		it := maps.Map(name).Iterate()
		for it.Next(&k, &v) {
			n++
		}
		if err := it.Err(); err != nil {
			return 0, fmt.Errorf("count %s: %w", name, err)
		}
	}
	return n, nil
}

func (p *netcubePeer) pid() int                   { pid, _ := p.sb.AgentPID(p.node.Name); return pid }
func (p *netcubePeer) ordered() bool              { return false }
func (p *netcubePeer) place([]string, bool) error { return nil }

// KubeProxyMode is one of kube-proxy's data planes.
type KubeProxyMode struct {
	Name    string // iptables-nft, iptables-legacy, nftables
	Mode    string // --proxy-mode
	Backend string // iptables binaries kube-proxy finds first in PATH: nft, legacy ("" in nftables mode)
}

// KubeProxyModes are the baselines: iptables mode with each iptables
// backend, and nftables mode.
var KubeProxyModes = []KubeProxyMode{
	{"iptables-nft", "iptables", "nft"},
	{"iptables-legacy", "iptables", "legacy"},
	{"nftables", "nftables", ""},
}

// KubeProxy runs the real kube-proxy on a sandbox node in place of netcube.
type KubeProxy struct {
	Mode    KubeProxyMode
	Node    sandbox.Node
	Tools   string // holds the kube-proxy binary (hack/build-tools.sh)
	Config  string // kubeconfig
	LogFile string
	// MinSyncZero: start with the minimum sync period at 0 (shipped: 1 s).
	MinSyncZero bool
	binDir      string // the backend's iptables tools, first in kube-proxy's PATH
	cmd         *exec.Cmd
	exited      chan struct{}
}

func (k *KubeProxy) name() string { return k.Mode.Name }

func (k *KubeProxy) inNode(args ...string) *exec.Cmd {
	cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + k.Node.Netns, "--"}, args...)...)
	cmd.Env = os.Environ()
	if k.binDir != "" {
		cmd.Env = append(cmd.Env, "PATH="+k.binDir+":"+os.Getenv("PATH"))
	}
	return cmd
}

func (k *KubeProxy) start() error {
	if k.Mode.Backend != "" && k.binDir == "" {
		dir, err := os.MkdirTemp("", "netcube-kp-"+k.Mode.Backend+"-")
		if err != nil {
			return err
		}
		for _, tool := range []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"} {
			target, err := exec.LookPath(strings.Replace(tool, "tables", "tables-"+k.Mode.Backend, 1))
			if err != nil {
				return err
			}
			if err := os.Symlink(target, filepath.Join(dir, tool)); err != nil {
				return err
			}
		}
		k.binDir = dir
	}
	// Defaults as a cluster runs them, but for the periodic resync: an
	// hourly one keeps a resync from landing in a measurement (and from
	// undoing place).
	k.cmd = k.inNode(filepath.Join(k.Tools, "kube-proxy"), "--kubeconfig", k.Config,
		"--hostname-override", k.Node.Name, "--proxy-mode", k.Mode.Mode, "--conntrack-max-per-core", "0",
		"--cluster-cidr", "10.244.0.0/16,fd00:10:244::/56", "--iptables-sync-period", "1h",
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256", "--v", "1")
	if k.MinSyncZero {
		// The iptables flag sets the minimum period of nftables mode too
		// (kube-proxy's processV1Alpha1Flags: every mode but IPVS).
		k.cmd.Args = append(k.cmd.Args, "--iptables-min-sync-period", "0s")
	}
	logf, err := os.Create(k.LogFile)
	if err != nil {
		return err
	}
	defer logf.Close()
	k.cmd.Stdout, k.cmd.Stderr = logf, logf
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := k.cmd.Start(); err != nil {
		return err
	}
	k.exited = make(chan struct{})
	go func() { _ = k.cmd.Wait(); close(k.exited) }()
	return nil
}

// stop ends kube-proxy and runs its --cleanup, which removes its rules.
func (k *KubeProxy) stop() error {
	if k.cmd != nil {
		_ = k.cmd.Process.Kill()
		<-k.exited
		k.cmd = nil
	}
	out, err := k.inNode(filepath.Join(k.Tools, "kube-proxy"), "--cleanup", "--proxy-mode", k.Mode.Mode).CombinedOutput()
	if k.binDir != "" {
		os.RemoveAll(k.binDir)
		k.binDir = ""
	}
	if err != nil {
		return fmt.Errorf("kube-proxy --cleanup: %v\n%s", err, out)
	}
	return nil
}

// Exited reports whether kube-proxy has died.
func (k *KubeProxy) Exited() bool { return closed(k.exited) }

// Start, Stop, Entries and Place are the peer's methods for tests.
func (k *KubeProxy) Start() error                          { return k.start() }
func (k *KubeProxy) Stop() error                           { return k.stop() }
func (k *KubeProxy) Entries() (int, error)                 { return k.entries() }
func (k *KubeProxy) Place(vips []string, first bool) error { return k.place(vips, first) }

// Rules returns kube-proxy's ruleset for both families, as its save tools
// print it.
func (k *KubeProxy) Rules() (string, error) {
	var cmds [][]string
	if k.Mode.Backend != "" {
		cmds = [][]string{{"iptables-save", "-t", "nat"}, {"ip6tables-save", "-t", "nat"}, {"iptables-save", "-t", "filter"}, {"ip6tables-save", "-t", "filter"}}
	} else {
		cmds = [][]string{{"nft", "-j", "list", "table", "ip", "kube-proxy"}, {"nft", "-j", "list", "table", "ip6", "kube-proxy"}}
	}
	var b strings.Builder
	for _, c := range cmds {
		out, err := k.inNode(c...).Output()
		if err != nil {
			return "", fmt.Errorf("%s: %w", strings.Join(c, " "), err)
		}
		b.Write(out)
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// entries: iptables rules (-A lines), or nftables rules plus the elements
// of its sets and verdict maps.
func (k *KubeProxy) entries() (int, error) {
	rules, err := k.Rules()
	if err != nil {
		return 0, err
	}
	if k.Mode.Backend != "" {
		return strings.Count(rules, "\n-A "), nil
	}
	n := 0
	dec := json.NewDecoder(strings.NewReader(rules)) // one document per table
	for {
		var ruleset struct {
			Nftables []map[string]json.RawMessage `json:"nftables"`
		}
		if err := dec.Decode(&ruleset); err == io.EOF {
			break
		} else if err != nil {
			return 0, fmt.Errorf("nft -j output: %w", err)
		}
		for _, obj := range ruleset.Nftables {
			if _, ok := obj["rule"]; ok {
				n++
			}
			for _, kind := range []string{"set", "map"} {
				var s struct {
					Elem []json.RawMessage `json:"elem"`
				}
				if raw, ok := obj[kind]; ok && json.Unmarshal(raw, &s) == nil {
					n += len(s.Elem)
				}
			}
		}
	}
	return n, nil
}

func (k *KubeProxy) pid() int {
	if k.cmd == nil || k.cmd.Process == nil {
		return 0
	}
	return k.cmd.Process.Pid
}

// ordered: iptables walks KUBE-SERVICES one rule at a time; nftables mode
// looks Services up in a verdict map.
func (k *KubeProxy) ordered() bool { return k.Mode.Backend != "" }

// place moves the KUBE-SERVICES rules of the ClusterIPs to the top of the
// chain, or to its end (just before the final jump to KUBE-NODEPORTS).
// kube-proxy writes KUBE-SERVICES in Go map order, a new random order each
// sync, so a given Service lands anywhere; place fixes the two extremes. It
// holds until kube-proxy's next sync, which the benchmark does not trigger
// while it measures.
func (k *KubeProxy) place(vips []string, first bool) error {
	for _, fam := range []struct{ save, restore, suffix string }{
		{"iptables-save", "iptables-restore", "/32"}, {"ip6tables-save", "ip6tables-restore", "/128"},
	} {
		out, err := k.inNode(fam.save, "-t", "nat").Output()
		if err != nil {
			return fmt.Errorf("%s: %w", fam.save, err)
		}
		var mine []string
		total := 0
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			rest, ok := strings.CutPrefix(line, "-A KUBE-SERVICES ")
			if !ok {
				continue
			}
			total++
			for _, vip := range vips {
				if strings.Contains(rest, "-d "+vip+fam.suffix+" ") {
					mine = append(mine, rest)
				}
			}
		}
		if len(mine) == 0 {
			continue // not this family
		}
		var script strings.Builder
		script.WriteString("*nat\n")
		for _, r := range mine {
			fmt.Fprintf(&script, "-D KUBE-SERVICES %s\n", r)
		}
		pos := 1
		if !first {
			pos = total - len(mine) // the position of the KUBE-NODEPORTS jump, which stays last
		}
		for i := len(mine) - 1; i >= 0; i-- {
			fmt.Fprintf(&script, "-I KUBE-SERVICES %d %s\n", pos, mine[i])
		}
		script.WriteString("COMMIT\n")
		cmd := k.inNode(fam.restore, "--noflush")
		cmd.Stdin = strings.NewReader(script.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s\n%s", fam.restore, err, out, script.String())
		}
	}
	return nil
}

// procUsage returns a process's CPU seconds, with those of the children it
// waited for (kube-proxy's iptables-restore and nft runs), and its peak
// resident memory in MiB.
func procUsage(pid int) (cpu, rssMB float64) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
			v, _ := strconv.ParseFloat(f[i], 64)
			cpu += v / 100 // USER_HZ
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		if m := vmHWM.FindSubmatch(b); m != nil {
			kb, _ := strconv.ParseFloat(string(m[1]), 64)
			rssMB = kb / 1024
		}
	}
	return cpu, rssMB
}

var vmHWM = regexp.MustCompile(`VmHWM:\s+(\d+) kB`)

// waitUntil polls cond every interval until it holds or timeout passes.
func waitUntil(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
}
