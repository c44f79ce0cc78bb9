#!/bin/bash
# One profiling session, run under: flock /tmp/nc-bench.lock /tmp/podprof/session.sh ROUND "IPv4 IPv6"
# Sets up the bare pair and a netcube-native sandbox exactly as `bench podnet`
# does, measures, profiles, and tears both down.
set -u
ROUND=$1
FAMS=${2:-IPv4}
REPS=${REPS:-1}
W=/work/main
NCPERF=/tmp/podprof/ncperf
OUT=/tmp/podprof/$ROUND
SB=pp
A=ncbarepp-a
B=ncbarepp-b
PORT=7000
mkdir -p $OUT
LOG=$OUT/session.log
exec > >(tee -a $LOG) 2>&1

cleanup() {
	echo "cleanup $(date -u +%T)"
	[ -n "${BSRV:-}" ] && kill $BSRV 2>/dev/null
	[ -n "${NSRV:-}" ] && kill $NSRV 2>/dev/null
	sysctl -q -w kernel.bpf_stats_enabled=0
	ip netns del $A 2>/dev/null
	ip netns del $B 2>/dev/null
	$W/bin/netcube-lab sandbox down --name $SB >/dev/null 2>&1
	wait $BSRV $NSRV 2>/dev/null
}
trap cleanup EXIT

echo "session $ROUND start $(date -u '+%F %T') commit $(git -C $W rev-parse --short HEAD) kernel $(uname -r)"
# bare pair, as lab/bench/podnet.go newBarePair
ip netns add $A; ip netns add $B
ip -n $A link add eth0 type veth peer name eth0 netns $B
ip -n $A addr add 192.0.2.1/24 dev eth0; ip -n $B addr add 192.0.2.2/24 dev eth0
ip -n $A addr add 2001:db8::1/64 dev eth0 nodad; ip -n $B addr add 2001:db8::2/64 dev eth0 nodad
ip -n $A link set eth0 up; ip -n $B link set eth0 up; ip -n $A link set lo up; ip -n $B link set lo up
ip netns exec $A sysctl -q -w net.ipv4.tcp_tw_reuse=1 "net.ipv4.ip_local_port_range=1024 65000"
ip netns exec $B taskset -c 1 $NCPERF serve $PORT & BSRV=$!

# netcube-native sandbox, as upPeer (sandbox.Config{Routing: native}: SocketLB false)
$W/bin/netcube-lab sandbox down --name $SB >/dev/null 2>&1
$W/bin/netcube-lab sandbox up --name $SB --routing native --socket-lb=false > $OUT/sandbox-up.log 2>&1 || { echo "sandbox up failed"; tail -20 $OUT/sandbox-up.log; exit 1; }
ip netns exec $SB-n1p1 sysctl -q -w net.ipv4.tcp_tw_reuse=1 "net.ipv4.ip_local_port_range=1024 65000"
$W/bin/netcube-lab sandbox exec --name $SB n1p2 -- taskset -c 1 $NCPERF serve $PORT & NSRV=$!
sleep 1

declare -A ADDR=([bare-IPv4]=192.0.2.2 [bare-IPv6]=2001:db8::2 [nc-IPv4]=10.244.1.2 [nc-IPv6]=fd00:10:244:1::2)
client() { # peer mode fam seconds
	local peer=$1 mode=$2 fam=$3 s=$4
	if [ $peer = bare ]; then
		ip netns exec $A taskset -c 1 $NCPERF $mode ${ADDR[$peer-$fam]} $PORT $s
	else
		$W/bin/netcube-lab sandbox exec --name $SB n1p1 -- taskset -c 1 $NCPERF $mode ${ADDR[$peer-$fam]} $PORT $s
	fi
}
segs() { # peer: client netns Tcp OutSegs + server netns Tcp OutSegs
	local c s
	if [ $1 = bare ]; then c=$A; s=$B; else c=$SB-n1p1; s=$SB-n1p2; fi
	for n in $c $s; do ip netns exec $n awk '/^Tcp:/ && $12 ~ /^[0-9]+$/ {print $12}' /proc/net/snmp; done | paste -sd+ | bc
}

# warm-up and reachability
for f in $FAMS; do for p in bare nc; do client $p rr $f 0.5 >/dev/null || echo "warm-up $p $f failed"; done; done

ip netns exec $SB-node1 bpftool net show > $OUT/bpftool-net-node1.txt 2>&1
fp=$(grep -m1 -o "netcube-from_pod id [0-9]*" $OUT/bpftool-net-node1.txt | awk '{print $3}')
if [ -n "$fp" ]; then
	bpftool prog show id $fp > $OUT/bpftool-from_pod.txt 2>&1
	for m in $(bpftool prog show id $fp -j | jq -r '.map_ids[]?'); do bpftool map show id $m; done >> $OUT/bpftool-from_pod.txt 2>&1
fi
bpftool cgroup tree /sys/fs/cgroup/unified/netcube-$SB > $OUT/bpftool-cgroup-tree.txt 2>&1 || bpftool cgroup tree > $OUT/bpftool-cgroup-tree.txt 2>&1

for f in $FAMS; do
	# plain rates (no perf), interleaved, with segment counts
	for rep in $(seq 1 $REPS); do
	for c in bare-crr nc-crr bare-rr nc-rr; do
		p=${c%-*}; m=${c#*-}
		s0=$(segs $p); r=$(client $p $m $f 5); s1=$(segs $p)
		echo "plain $f $c rep$rep: $r segs(v4 Tcp OutSegs both ends)=$((s1-s0))"
		echo "$f $c $rep $r $((s1-s0))" >> $OUT/plain.txt
	done
	done
	# perf profiles, interleaved
	for rep in $(seq 1 $REPS); do
	for c in bare-crr nc-crr bare-rr nc-rr; do
		p=${c%-*}; m=${c#*-}
		client $p $m $f 10 > $OUT/perf-$f-$c-$rep.rate &
		cp=$!
		sleep 2
		perf record -q -C 1 -g -o $OUT/perf-$f-$c-$rep.data -- sleep 6 2>/dev/null
		wait $cp
		echo "perf $f $c rep$rep: $(cat $OUT/perf-$f-$c-$rep.rate)"
	done
	done
	# BPF run counts and times for netcube's programs
	bpftool prog show -j > $OUT/bpf-$f-0.json
	sysctl -q -w kernel.bpf_stats_enabled=1
	for m in crr rr; do
		bpftool prog show -j > $OUT/bpf-$f-$m-before.json
		r=$(client nc $m $f 5)
		bpftool prog show -j > $OUT/bpf-$f-$m-after.json
		echo "bpfstats $f nc-$m: $r"
		echo "$r" > $OUT/bpf-$f-$m.rate
	done
	sysctl -q -w kernel.bpf_stats_enabled=0
done
echo "measurements done $(date -u '+%F %T')"
for d in $OUT/perf-*.data; do
	perf report -i $d --no-children --sort sym --stdio -g none 2>/dev/null > ${d%.data}.report.txt
done
echo "session $ROUND end $(date -u '+%F %T')"
