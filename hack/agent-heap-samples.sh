#!/usr/bin/env bash
# Samples the heap of every netcube-agent process while a benchmark runs,
# to see what an agent holds at its peak (docs/benchmarks/memory-profile.md):
# about every 0.3 s, each agent's heap profile (/debug/pprof/heap, as of
# its last collection), its runtime.MemStats (HeapAlloc, NextGC, Sys...)
# and its VmHWM. The agents must serve /debug/pprof on 127.0.0.1:10249 of
# their network namespace (--profiling, the default metrics address):
# with bench compare, --agent-arg=--profiling.
#
#   hack/agent-heap-samples.sh OUTDIR SECONDS
#
# writes OUTDIR/<pid>-<n>.pprof, OUTDIR/<pid>-memstats.txt (one line per
# sample: n, then the MemStats fields in bytes) and OUTDIR/hwm.txt (pid,
# n, VmHWM in kB). The peak: the sample whose VmHWM first reaches the
# process's maximum, and the profile with the largest in-use total.
set -euo pipefail
out=$1
end=$((SECONDS + $2))
mkdir -p "$out"
declare -A taken
while [ $SECONDS -lt $end ]; do
  for pid in $(pgrep -x netcube-agent || true); do
    n=$((${taken[$pid]:-0} + 1))
    taken[$pid]=$n
    url=http://127.0.0.1:10249/debug/pprof/heap
    nsenter -t "$pid" -n curl -sf -m 2 -o "$out/$pid-$(printf %04d "$n").pprof" "$url" || true
    stats=$(nsenter -t "$pid" -n curl -sf -m 2 "$url?debug=1" |
      grep -E '^# (HeapAlloc|HeapSys|HeapInuse|HeapIdle|HeapReleased|Sys|NextGC|StackSys|NumGC) ' | tr '\n' ' ' || true)
    echo "$n $stats" >>"$out/$pid-memstats.txt"
    awk -v n="$n" -v pid="$pid" '/^VmHWM/ {print pid, n, $2}' "/proc/$pid/status" >>"$out/hwm.txt" 2>/dev/null || true
  done
  sleep 0.15
done
