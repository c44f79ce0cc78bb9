#!/usr/bin/env bash
# What a change costs each packet path: BenchmarkPacketPaths (pkg/datapath,
# BPF_PROG_RUN, the programs' own time per packet) built at two commits and
# run alternately (ABBA, ROUNDS times), each run pinned to CPU 1, so that the
# machine's drift falls on both. The benchmark file is the current tree's,
# copied into both (it uses only what the trees share); a tree without the
# source check gets a registerPodSource that does nothing.
# Writes $OUT/packet-ab.json, packet-ab.md and plots/packet-ab.svg (OUT:
# docs/benchmarks). Run it alone on the machine.
#
#   hack/bench-packet-ab.sh BASE [HEAD] [ROUNDS]
set -euo pipefail
root=$(git rev-parse --show-toplevel)
base=$(git -C "$root" rev-parse "$1") head=$(git -C "$root" rev-parse "${2:-HEAD}") rounds=${3:-4}
out=${OUT:-$root/docs/benchmarks}
tmp=$(mktemp -d)
cleanup() {
  git -C "$root" worktree remove --force "$tmp/a" 2>/dev/null || true
  git -C "$root" worktree remove --force "$tmp/b" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
for v in a b; do
  rev=$base; [ $v = b ] && rev=$head
  echo "bench-packet-ab: building $v (${rev:0:12})" >&2
  git -C "$root" worktree add -q --detach "$tmp/$v" "$rev"
  cp "$root/pkg/datapath/packet_cost_test.go" "$tmp/$v/pkg/datapath/"
  if grep -q "func podSource" "$tmp/$v"/pkg/datapath/*_test.go; then
    cp "$root/pkg/datapath/packet_cost_source_test.go" "$tmp/$v/pkg/datapath/"
  else
    cat > "$tmp/$v/pkg/datapath/packet_cost_source_test.go" <<'GO'
package datapath_test

import (
	"net/netip"
	"testing"

	"github.com/netcube/netcube/pkg/datapath"
)

// registerPodSource: this tree has no source check.
func registerPodSource(testing.TB, *datapath.Datapath, netip.Addr) {}
GO
  fi
  (cd "$tmp/$v" && go test -c -o "$tmp/$v.test" ./pkg/datapath/)
done
i=0
for r in $(seq 1 "$rounds"); do
  for v in a b b a; do
    i=$((i + 1))
    echo "bench-packet-ab: run $i of $((4 * rounds)): $v at $(date -u +%H:%M:%S)" >&2
    (cd "$tmp/$v/pkg/datapath" && NETCUBE_PACKET_COST_OUT="$tmp/$v.jsonl" taskset -c 1 "$tmp/$v.test" \
      -test.run '^$' -test.bench BenchmarkPacketPaths -test.benchtime 1x >/dev/null)
  done
done
mkdir -p "$out/plots"
python3 - "$tmp" "$out" "$base" "$head" "$rounds" <<'PY'
import json, statistics, sys, datetime, platform, os
tmp, out, base, head, rounds = sys.argv[1:6]
runs = {v: [json.loads(l) for l in open(f"{tmp}/{v}.jsonl")] for v in "ab"}
paths = list(runs["a"][0].keys())
rows = []
for p in paths:
    a = [r[p] for r in runs["a"]]; b = [r[p] for r in runs["b"]]
    ma, mb = statistics.median(a), statistics.median(b)
    rows.append({"path": p, "base_ns": round(ma, 1), "head_ns": round(mb, 1), "change_percent": round(100 * (mb - ma) / ma, 1),
                 "base_runs": [round(x, 1) for x in a], "head_runs": [round(x, 1) for x in b]})
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
doc = {"base": base, "head": head, "measured_at": now, "kernel": platform.release(), "cpu": cpu,
       "runs_each": len(runs["a"]), "order": "abba x %s" % rounds,
       "command": f"hack/bench-packet-ab.sh {base[:12]} {head[:12]} {rounds}", "paths": rows}
json.dump(doc, open(f"{out}/packet-ab.json", "w"), indent=1)
md = [f"# Per-packet cost: {head[:12]} against {base[:12]}", "",
      f"Measured {now} in one session, on this machine ({cpu}, kernel {platform.release()}), each run pinned to CPU 1:", "",
      f"    {doc['command']}", "",
      "BPF_PROG_RUN of each path's program, the program's own time per packet (the kernel's clock), "
      f"{len(runs['a'])} runs of each commit alternating (ABBA); medians of the runs. Base is `{base[:12]}`, head `{head[:12]}`.", "",
      "| path | base (ns/packet) | head (ns/packet) | change |", "|---|---:|---:|---:|"]
for r in rows:
    md.append(f"| {r['path']} | {r['base_ns']} | {r['head_ns']} | {r['change_percent']:+.1f}% |")
md += ["", "Runs (ns/packet), base: " + "; ".join(f"{r['path']} {r['base_runs']}" for r in rows),
       "", "Runs (ns/packet), head: " + "; ".join(f"{r['path']} {r['head_runs']}" for r in rows),
       "", "![per-packet cost](plots/packet-ab.svg)", ""]
open(f"{out}/packet-ab.md", "w").write("\n".join(md))
# A bar chart: base and head per path.
w, bh, gap = 640, 18, 14
top = max(max(r["base_ns"], r["head_ns"]) for r in rows)
h = 40 + len(rows) * (2 * bh + gap)
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
       f'<text x="10" y="18">ns per packet (BPF_PROG_RUN), base {base[:12]} (grey) vs head {head[:12]} (blue)</text>']
y = 32
for r in rows:
    for k, color in (("base_ns", "#999"), ("head_ns", "#36c")):
        bw = (w - 260) * r[k] / top
        svg.append(f'<rect x="180" y="{y}" width="{bw:.1f}" height="{bh - 2}" fill="{color}"/>')
        svg.append(f'<text x="{185 + bw:.1f}" y="{y + bh - 6}">{r[k]}</text>')
        y += bh
    svg.append(f'<text x="10" y="{y - bh + 2}">{r["path"]}</text>')
    y += gap
svg.append("</svg>")
open(f"{out}/plots/packet-ab.svg", "w").write("\n".join(svg))
print("\n".join(md[:12 + len(rows)]))
PY
