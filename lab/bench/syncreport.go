package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netcube/netcube/pkg/source/kube"
)

// SyncMarkdown renders the control-plane results.
func SyncMarkdown(cfg SyncConfig, results []SyncResult, at time.Time) string {
	var b strings.Builder
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	fmt.Fprintf(&b, "# netcube control plane: sync cost vs number of Services\n\n")
	var commits []string
	for _, r := range results {
		if c := commitName(r.Commit); !slices.Contains(commits, c) {
			commits = append(commits, c)
		}
	}
	fmt.Fprintf(&b, "Measured %s (netcube %s) on %s (kernel %s, %d CPUs) against a real kube-apiserver + etcd (v1.36.3, built from the Go module proxy) on the same machine. ",
		at.UTC().Format("2006-01-02 15:04 UTC"), strings.Join(commits, ", "), unix.ByteSliceToString(uts.Nodename[:]), unix.ByteSliceToString(uts.Release[:]), runtime.NumCPU())
	fmt.Fprintf(&b, "Each Service: one ClusterIP, one TCP port, one EndpointSlice. %d endpoint changes timed per point, through the API. ", cfg.Changes)
	b.WriteString("The Services, their EndpointSlices and ClusterIP IPAddress objects are written straight into etcd in the API server's storage encoding (`kubeenv.StoreDirect`): ")
	b.WriteString("kube-apiserver v1.36 does O(Services) work per Service create (`ipallocator.Allocator.Used` lists every IPAddress), so creating 100,000 through the API takes hours. ")
	b.WriteString("The agent lists and watches them through the API server like any others. ")
	b.WriteString("Each point's first agent starts once the API server and etcd are idle (under 0.05 CPU-seconds in a second): the API server takes the direct writes into its watch cache after they return, and an agent started meanwhile would be timed against that work.\n\n")
	b.WriteString("- **write → map**: the client's EndpointSlice update returns → the new backend is in the agent's BPF maps (includes the API server and the watch).\n")
	b.WriteString("- **event → map**: the change reaches the agent → its map writes are done (agent histogram `netcube_event_to_programmed_seconds`, factor-2 buckets, interpolated).\n")
	b.WriteString("- **full sync (apply)**: time the agent spends computing and writing every Service once the initial lists are complete (it applies nothing before, so no Service is ever programmed without its endpoints); *first* = empty maps, *restart* = pinned maps already right (map updates on restart shown). This and the two columns after it are medians of several agent starts (`--starts`).\n")
	b.WriteString("- **first event → applied**: wall time from the first object received to every Service in the maps (bounded by how fast the API server lists).\n")
	b.WriteString("- **start → ready**: agent process start → ready, including listing every object from the API server.\n")
	b.WriteString("- **agent CPU, peak RSS**: of the first agent process, read from /proc after the endpoint changes (peak RSS is VmHWM: heap, runtime and the binary's pages). The agent runs with its defaults: GOGC=50 (`--gc-percent`), no GOMEMLIMIT.\n\n")
	b.WriteString("| Services | endpoints each | write → map p50 / p99 (ms) | event → map p50 / p99 (ms) | full sync apply first / restart (ms) | first event → applied first / restart (ms) | restart map updates | start → ready first / restart (ms) | agent CPU (s) | agent peak RSS (MB) |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %d | %d | %.2f / %.2f | %.3f / %.3f | %.1f / %.1f | %.0f / %.0f | %d | %.0f / %.0f | %.1f | %.0f |\n",
			r.Services, r.Endpoints, r.WriteToMapP50, r.WriteToMapP99, r.EventToMapP50, r.EventToMapP99,
			r.FullSyncFirst, r.FullSyncRestart, r.FirstEventToAppliedFirst, r.FirstEventToAppliedRestart,
			r.RestartMapUpdates, r.StartToReady, r.RestartToReady, r.CPUSeconds, r.PeakRSSMB)
	}
	b.WriteString("\nWhere a first start's full sync goes (medians of the starts; the agent logs these with its initial sync). ")
	b.WriteString("**list**: waiting for the API server's pages of Services and EndpointSlices (request, server, reading the body); **decode**: protobuf → API objects; ")
	b.WriteString("**translate**: API objects → netcube's model, as they arrive (*convert*), then, once the lists are complete, the model → frontends and backends, ownership and the cube's bookkeeping (*compute*); ")
	b.WriteString("**map writes**: the system calls writing lb_services, lb_backends and lb_revnat (batched). ")
	b.WriteString("List, decode and convert are summed over the two resources, which are listed at the same time; compute + map writes = full sync apply.\n\n")
	b.WriteString("**API server CPU**: the kube-apiserver process's CPU seconds from the agent's start to ready (/proc), what one agent's initial lists cost it.\n\n")
	b.WriteString("| Services | endpoints each | list (ms) | decode (ms) | translate: convert + compute (ms) | map writes (ms) | API server CPU (s) |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range results {
		p := r.Split
		if p == (SyncSplit{}) {
			fmt.Fprintf(&b, "| %d | %d | – | – | – | – | – |\n", r.Services, r.Endpoints) // measured before the agent logged it
			continue
		}
		fmt.Fprintf(&b, "| %d | %d | %.0f | %.0f | %.0f + %.0f | %.0f | %s |\n", r.Services, r.Endpoints, p.ListMS, p.DecodeMS, p.ConvertMS, p.ComputeMS, p.MapWriteMS, fmtOrDash(r.APIServerCPUFirst, "%.2f"))
	}
	if slices.ContainsFunc(results, func(r SyncResult) bool { return r.Gzip != nil }) {
		b.WriteString("\nGzip-compressed lists (`--api-compression`; the agent's default asks for none): the same first starts, each just before one of the uncompressed starts above (medians).\n\n")
		b.WriteString("| Services | endpoints each | start → ready, uncompressed / gzip (ms) | list, uncompressed / gzip (ms) | decode, uncompressed / gzip (ms) | API server CPU, uncompressed / gzip (s) |\n")
		b.WriteString("|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range results {
			if g := r.Gzip; g != nil {
				fmt.Fprintf(&b, "| %d | %d | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.2f / %.2f |\n", r.Services, r.Endpoints,
					r.StartToReady, g.StartToReady, r.Split.ListMS, g.ListMS, r.Split.DecodeMS, g.DecodeMS, r.APIServerCPUFirst, g.APIServerCPU)
			}
		}
	}
	if slices.ContainsFunc(results, func(r SyncResult) bool { return len(r.PageSizes) > 0 }) {
		fmt.Fprintf(&b, "\nList page size (`--api-list-page-size`; the agent's default asks for %d objects a page, first row of each point): the same first starts, each just before one of the default's starts above (medians). ", kube.DefaultPageSize)
		b.WriteString("The API server serves each page from its watch cache by walking every object from the page's first to the end of the list, so its CPU grows with the number of pages. **peak RSS at ready**: the agent's VmHWM once its initial sync is applied.\n\n")
		b.WriteString("| Services | endpoints each | page size | start → ready (ms) | list (ms) | decode (ms) | API server CPU (s) | agent peak RSS at ready (MB) |\n")
		b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range results {
			if len(r.PageSizes) == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %d | %d | %d (default) | %.0f | %.0f | %.0f | %.2f | %.0f |\n", r.Services, r.Endpoints, kube.DefaultPageSize,
				r.StartToReady, r.Split.ListMS, r.Split.DecodeMS, r.APIServerCPUFirst, r.PeakRSSAtReadyMB)
			for _, p := range r.PageSizes {
				fmt.Fprintf(&b, "| %d | %d | %d | %.0f | %.0f | %.0f | %.2f | %.0f |\n", r.Services, r.Endpoints, p.PageSize,
					p.StartToReady, p.ListMS, p.DecodeMS, p.APIServerCPU, p.PeakRSSAtReadyMB)
			}
		}
	}
	b.WriteString("\nTargets (issue 3): at 10,000 Services one endpoint change applied < 1 ms after its event arrives and full sync < 100 ms; ")
	b.WriteString("at 100,000 Services full sync < 1 s and agent RSS < 150 MB. ")
	b.WriteString("Issue 33: agent peak RSS at 100,000 Services < 200 MB with 10 endpoints each, < 150 MB with one.\n\n")
	// The points in the report (after --merge, more than the last run's).
	var sizes, eps []string
	for _, r := range results {
		if s := fmt.Sprint(r.Services); !slices.Contains(sizes, s) {
			sizes = append(sizes, s)
		}
		if e := fmt.Sprint(r.Endpoints); !slices.Contains(eps, e) {
			eps = append(eps, e)
		}
	}
	starts := cfg.Starts
	if starts <= 0 {
		starts = 3
	}
	gz := ""
	if cfg.GzipLists {
		gz = " --gzip-lists"
	}
	for i, size := range cfg.PageSizes {
		sep := ","
		if i == 0 {
			sep = " --page-sizes "
		}
		gz += sep + fmt.Sprint(size)
	}
	fmt.Fprintf(&b, "Reproduce: `make bench-sync` (`bin/netcube-lab bench sync --services %s --endpoints %s --changes %d --starts %d%s`; `--merge` adds to the points already in the report).\n",
		strings.Join(sizes, ","), strings.Join(eps, ","), cfg.Changes, starts, gz)
	return b.String()
}

func writeSyncReport(cfg SyncConfig, results []SyncResult) error {
	at := time.Now()
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return err
	}
	if cfg.Merge {
		results = mergeResults(filepath.Join(cfg.OutDir, "sync.json"), results)
	}
	// Each result names its commit (a merged report may hold points of
	// several sessions); the top-level commit is this session's.
	j, _ := json.MarshalIndent(map[string]any{"commit": Commit(), "measured_at": at.UTC(), "changes": cfg.Changes, "results": results}, "", "  ")
	if err := os.WriteFile(filepath.Join(cfg.OutDir, "sync.json"), j, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(cfg.OutDir, "sync.md"), []byte(SyncMarkdown(cfg, results, at)), 0o644)
}

// mergeResults adds results to those already in path (a run in pieces: a
// point measured again replaces the old one), ordered by endpoints, then
// Services.
func mergeResults(path string, results []SyncResult) []SyncResult {
	var old struct {
		Results []SyncResult `json:"results"`
	}
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &old)
	}
	type key struct{ n, e int }
	byKey := map[key]SyncResult{}
	for _, r := range append(old.Results, results...) {
		r.Commit = recorded(r.Commit)
		byKey[key{r.Services, r.Endpoints}] = r
	}
	out := make([]SyncResult, 0, len(byKey))
	for _, r := range byKey {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b SyncResult) int {
		if a.Endpoints != b.Endpoints {
			return a.Endpoints - b.Endpoints
		}
		return a.Services - b.Services
	})
	return out
}

// fmtOrDash formats v, or "–" when it was not measured (0: a point from
// before the report had the column).
func fmtOrDash(v float64, format string) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf(format, v)
}
