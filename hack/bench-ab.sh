#!/usr/bin/env bash
# Alternating 100,000 dual-stack Service runs of two agents' builds (the
# bench compare command of memory-profile.md), each into its own directory,
# then one JSON line per run: what memory-levers.json keeps.
# DIR_A and DIR_B are checkouts with bin/ built (make build; a second one:
# git worktree add DIR REV). Run it alone on the machine (flock
# /tmp/nc-bench.lock), never beside a build.
#
#   hack/bench-ab.sh OUT ORDER DIR_A DIR_B   (ORDER like "babaabba": a/b per run)
set -euo pipefail
out=$1 order=$2 a=$3 b=$4
mkdir -p "$out"
i=0
for v in $(echo "$order" | grep -o '[ab]'); do
  i=$((i+1))
  dir=$a; [ "$v" = b ] && dir=$b
  echo "run $i: $v ($dir) at $(date -u +%H:%M:%S)" >&2
  (cd "$dir" && bin/netcube-lab bench compare --services 100000 --peers netcube --runs 1 --reactions 1 --duration 1s --churn 2s --out "$out/run$i-$v" >"$out/run$i-$v.log" 2>&1)
  python3 - "$out/run$i-$v" "$v" "$i" <<'PY'
import json, sys
d = json.load(open(sys.argv[1] + "/compare.json"))
p = [p for p in d["points"] if p["services"] == 100000][0]
s = p["full_sync_split"]
print(json.dumps({"run": int(sys.argv[3]), "variant": sys.argv[2], "measured_at": p["measured_at"],
  "commit": d["config"]["commit"], "kernel": d["machine"]["kernel"],
  "full_sync_s": round(p["full_sync_s"], 2), "lists_s": round(s["lists_s"], 2), "apply_s": round(s["apply_s"], 2),
  "decode_s": round(s["phases"]["decode_ms"] / 1000, 2), "apiserver_etcd_cpu_s": round(p["sync_control_plane_cpu_s"], 2),
  "agent_cpu_s": round(p["cpu_seconds"], 2), "peak_rss_mb": round(p["peak_rss_mb"]),
  "command": d["config"]["command"]}))
PY
done | tee "$out/runs.jsonl"
