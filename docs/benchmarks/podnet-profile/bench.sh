#!/bin/bash
# Run under: flock /tmp/nc-bench.lock /tmp/podprof/bench.sh NAME RUNS
# bench podnet (netcube-native only) with perf record -C 1 started 1 s into
# each same-node rr/crr phase of the bare pair and of netcube-native.
set -u
NAME=$1; RUNS=${2:-1}
OUT=/tmp/podprof/$NAME
mkdir -p $OUT
cd /work/main
watch() {
	declare -A seen
	while true; do
		for pid in $(pgrep -f "ncperf c?rr (192\.0\.2\.2|10\.244\.1\.2|2001:db8::2|fd00:10:244:1::2) 7000 "); do
			[ -n "${seen[$pid]:-}" ] && continue
			seen[$pid]=1
			args=$(tr '\0' ' ' < /proc/$pid/cmdline 2>/dev/null) || continue
			set -- ${args#*ncperf }
			mode=$1; addr=$2; dur=${4%.*}
			[ "${dur:-0}" -lt 5 ] && continue
			case $addr in 192.0.2.2) c=bare-IPv4;; 2001:db8::2) c=bare-IPv6;; 10.244.1.2) c=nc-IPv4;; *) c=nc-IPv6;; esac
			n=$(ls $OUT/perf-$c-$mode-*.data 2>/dev/null | wc -l)
			sleep 1
			echo "$(date -u +%T) perf $c $mode pid $pid" >> $OUT/watch.log
			perf record -q -C 1 -g -o $OUT/perf-$c-$mode-$((n+1)).data -- sleep 6 2>/dev/null
		done
		sleep 0.05
	done
}
watch & W=$!
echo "bench $NAME start $(date -u '+%F %T') commit $(git rev-parse --short HEAD)" > $OUT/bench.log
bin/netcube-lab bench podnet --peers netcube-native --runs $RUNS --duration 8s --startups 1 --out $OUT >> $OUT/bench.log 2>&1
echo "rc $? end $(date -u '+%F %T')" >> $OUT/bench.log
kill $W; wait $W 2>/dev/null
for d in $OUT/perf-*.data; do
	perf report -i $d --no-children --sort sym --stdio -g none 2>/dev/null > ${d%.data}.report.txt
done
