package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// CompareReport is the benchmark's whole output: every figure, and how it
// was measured.
type CompareReport struct {
	MeasuredAt time.Time         `json:"measured_at"`
	Machine    map[string]string `json:"machine"`
	Config     struct {
		Sizes        []int   `json:"sizes"`
		DurationS    float64 `json:"duration_s"`
		Runs         int     `json:"runs"`
		Reactions    int     `json:"reactions"`
		ChurnS       float64 `json:"churn_s"`
		ChurnEveryS  float64 `json:"churn_every_s"`
		KubeProxyMax int     `json:"kube_proxy_max"`
		// MinSyncZeroMax: up to this size kube-proxy's endpoint changes
		// were timed with its minimum sync period at 0 too.
		MinSyncZeroMax int `json:"min_sync_zero_max,omitempty"`
		// KubeProxyChangesMax: above this size kube-proxy's endpoint
		// changes and rolling update were not timed (0: at every size).
		KubeProxyChangesMax int    `json:"kube_proxy_changes_max,omitempty"`
		Commit              string `json:"commit"` // the netcube commit measured (Commit)
		Command             string `json:"command"`
	} `json:"config"`
	Points []PeerPoint `json:"points"`
	// Merged lists the runs the points come from, when sizes were added to
	// an earlier report (--merge).
	Merged []Session `json:"merged,omitempty"`
}

// Session is one run of the benchmark and the sizes it measured.
type Session struct {
	At      time.Time `json:"at"`
	Sizes   []int     `json:"sizes"`
	Command string    `json:"command"`
	Commit  string    `json:"commit"` // the netcube commit measured (Commit; UnknownCommit: a session from before reports named theirs)
	// CommitNote says why Commit is unknown, when it is.
	CommitNote string `json:"commit_note,omitempty"`
}

func newCompareReport(cfg CompareConfig) *CompareReport {
	r := &CompareReport{MeasuredAt: time.Now().UTC(), Machine: machine(cfg.ToolsDir)}
	r.Config.Sizes, r.Config.DurationS, r.Config.Runs = cfg.Sizes, cfg.Duration.Seconds(), cfg.Runs
	r.Config.Reactions, r.Config.ChurnS, r.Config.ChurnEveryS = cfg.Reactions, cfg.ChurnFor.Seconds(), cfg.ChurnEvery.Seconds()
	r.Config.KubeProxyMax, r.Config.Command = cfg.KubeProxyMax, cfg.Command
	r.Config.MinSyncZeroMax, r.Config.Commit = cfg.MinSyncZeroMax, Commit()
	r.Config.KubeProxyChangesMax = cfg.KubeProxyChangesMax
	return r
}

// machine records what the figures were measured on.
func machine(tools string) map[string]string {
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	m := map[string]string{
		"host": unix.ByteSliceToString(uts.Nodename[:]), "kernel": unix.ByteSliceToString(uts.Release[:]),
		"cpus": fmt.Sprint(runtime.NumCPU()), "go": runtime.Version(),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m["cpu"] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	version := func(key string, args ...string) {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err == nil {
			m[key] = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
		}
	}
	version("kube-proxy", filepath.Join(tools, "kube-proxy"), "--version")
	// Built from the module proxy, it has no version stamped in: the
	// pinning says which.
	if b, err := os.ReadFile("hack/tools/go.mod"); err == nil && strings.Contains(m["kube-proxy"], "v0.0.0") {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[0] == "k8s.io/kubernetes" {
				m["kube-proxy"] = "k8s.io/kubernetes " + f[1]
			}
		}
	}
	version("iptables", "iptables-nft", "--version")
	version("nft", "nft", "--version")
	version("iperf3", "iperf3", "--version")
	return m
}

// Write saves compare.json, compare.md and the plots under dir.
func (r *CompareReport) Write(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "plots"), 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "compare.json"), j, 0o644); err != nil {
		return err
	}
	plots, err := r.writePlots(filepath.Join(dir, "plots"))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "compare.md"), []byte(r.Markdown(plots)), 0o644)
}

func (r *CompareReport) peers() []string {
	var out []string
	for _, p := range r.Points {
		if !slices.Contains(out, p.Peer) {
			out = append(out, p.Peer)
		}
	}
	return out
}

func (r *CompareReport) sizes() []int {
	var out []int
	for _, p := range r.Points {
		if !slices.Contains(out, p.Services) {
			out = append(out, p.Services)
		}
	}
	slices.Sort(out)
	return out
}

func (r *CompareReport) point(peer string, n int) (PeerPoint, bool) {
	for _, p := range r.Points {
		if p.Peer == peer && p.Services == n {
			return p, true
		}
	}
	return PeerPoint{}, false
}

// LoadCompareReport reads dir/compare.json, so that the Markdown and plots
// can be rendered again without measuring again.
func LoadCompareReport(dir string) (*CompareReport, error) {
	b, err := os.ReadFile(filepath.Join(dir, "compare.json"))
	if err != nil {
		return nil, err
	}
	var r CompareReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "compare.json"), err)
	}
	return &r, nil
}

// keepEarlier takes the points of dir's compare.json at the sizes this run
// does not measure. They must have been measured the same way: a merged
// report compares points of different runs only across sizes, never across
// data planes at one size.
func (r *CompareReport) keepEarlier(dir string) error {
	old, err := LoadCompareReport(dir)
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	if old.Config.Runs != r.Config.Runs || old.Config.DurationS != r.Config.DurationS || old.Config.Reactions != r.Config.Reactions ||
		old.Config.ChurnS != r.Config.ChurnS || old.Config.ChurnEveryS != r.Config.ChurnEveryS {
		return fmt.Errorf("merge: %s was measured with other settings (runs %d, duration %gs, reactions %d, churn %gs every %gs); use the same",
			filepath.Join(dir, "compare.json"), old.Config.Runs, old.Config.DurationS, old.Config.Reactions, old.Config.ChurnS, old.Config.ChurnEveryS)
	}
	for _, p := range old.Points {
		if slices.Contains(r.Config.Sizes, p.Services) {
			continue
		}
		if p.MeasuredAt.IsZero() {
			p.MeasuredAt = old.MeasuredAt
		}
		r.Points = append(r.Points, p)
	}
	earlier := old.Merged
	if len(earlier) == 0 {
		earlier = []Session{{At: old.MeasuredAt, Sizes: old.sizes(), Command: old.Config.Command, Commit: recorded(old.Config.Commit)}}
	}
	for _, m := range earlier {
		m.Sizes = slices.DeleteFunc(m.Sizes, func(n int) bool { return slices.Contains(r.Config.Sizes, n) })
		if len(m.Sizes) > 0 {
			r.Merged = append(r.Merged, m)
		}
	}
	r.Merged = append(r.Merged, Session{At: r.MeasuredAt, Sizes: r.Config.Sizes, Command: r.Config.Command, Commit: r.Config.Commit})
	r.Config.Sizes = append(r.sizes(), r.Config.Sizes...)
	slices.Sort(r.Config.Sizes)
	r.Config.Sizes = slices.Compact(r.Config.Sizes)
	return nil
}
