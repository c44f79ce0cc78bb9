#!/bin/bash
# Run under: flock /tmp/nc-bench.lock /tmp/podprof/floor.sh NAME
# The bare pair, a "floor" pair (two namespaces joined through a third by
# two veths, a tc ingress program on each host-side veth that only calls
# bpf_redirect_peer: netcube's topology and hook with none of its work),
# and netcube-native, interleaved; IPv4.
set -u
NAME=$1
W=/work/main
NCPERF=/tmp/podprof/ncperf
OUT=/tmp/podprof/$NAME
SB=pp; A=ncbarepp-a; B=ncbarepp-b; FA=ncfloor-a; FB=ncfloor-b; FH=ncfloor-h
PORT=7000
mkdir -p $OUT
LOG=$OUT/session.log
exec >> $LOG 2>&1
cleanup() {
	echo "cleanup $(date -u +%T)"
	for p in ${BSRV:-} ${FSRV:-} ${NSRV:-}; do kill $p 2>/dev/null; done
	for n in $A $B $FA $FB $FH; do ip netns del $n 2>/dev/null; done
	$W/bin/netcube-lab sandbox down --name $SB >/dev/null 2>&1
	wait ${BSRV:-} ${FSRV:-} ${NSRV:-} 2>/dev/null
}
trap cleanup EXIT
echo "session $NAME start $(date -u '+%F %T') commit $(git -C $W rev-parse --short HEAD) kernel $(uname -r)"
# bare pair, as lab/bench/podnet.go newBarePair (IPv4 part)
ip netns add $A; ip netns add $B
ip -n $A link add eth0 type veth peer name eth0 netns $B
ip -n $A addr add 192.0.2.1/24 dev eth0; ip -n $B addr add 192.0.2.2/24 dev eth0
ip -n $A link set eth0 up; ip -n $B link set eth0 up; ip -n $A link set lo up; ip -n $B link set lo up
ip netns exec $A sysctl -q -w net.ipv4.tcp_tw_reuse=1 "net.ipv4.ip_local_port_range=1024 65000"
ip netns exec $B taskset -c 1 $NCPERF serve $PORT & BSRV=$!
# floor: FA eth0 <-> ha (FH) , hb (FH) <-> FB eth0
ip netns add $FA; ip netns add $FB; ip netns add $FH
ip -n $FH link add ha type veth peer name eth0 netns $FA
ip -n $FH link add hb type veth peer name eth0 netns $FB
for n in $FA $FB $FH; do ip -n $n link set lo up; done
ip -n $FH link set ha up; ip -n $FH link set hb up
ip -n $FA addr add 10.99.0.1/32 dev eth0; ip -n $FB addr add 10.99.0.2/32 dev eth0
ip -n $FA link set eth0 up; ip -n $FB link set eth0 up
ip -n $FA route add 10.99.0.2/32 dev eth0 scope link; ip -n $FB route add 10.99.0.1/32 dev eth0 scope link
MA=$(ip -n $FH -j link show ha | jq -r '.[0].address'); MB=$(ip -n $FH -j link show hb | jq -r '.[0].address')
ip -n $FA neigh add 10.99.0.2 lladdr $MA dev eth0 nud permanent
ip -n $FB neigh add 10.99.0.1 lladdr $MB dev eth0 nud permanent
IA=$(ip -n $FH -j link show ha | jq -r '.[0].ifindex'); IB=$(ip -n $FH -j link show hb | jq -r '.[0].ifindex')
clang -O2 -g -target bpf -I/usr/include/x86_64-linux-gnu -DIFA=$IA -DIFB=$IB -c /tmp/podprof/floor/redir.c -o $OUT/redir.o || exit 1
for d in ha hb; do
	ip netns exec $FH tc qdisc add dev $d clsact
	ip netns exec $FH tc filter add dev $d ingress bpf da obj $OUT/redir.o sec tc || exit 1
done
ip netns exec $FH tc filter show dev ha ingress
ip netns exec $FA sysctl -q -w net.ipv4.tcp_tw_reuse=1 "net.ipv4.ip_local_port_range=1024 65000"
ip netns exec $FB taskset -c 1 $NCPERF serve $PORT & FSRV=$!
# netcube-native sandbox, as upPeer
$W/bin/netcube-lab sandbox down --name $SB >/dev/null 2>&1
$W/bin/netcube-lab sandbox up --name $SB --routing native --socket-lb=false > $OUT/sandbox-up.log 2>&1 || { echo "sandbox up failed"; exit 1; }
ip netns exec $SB-n1p1 sysctl -q -w net.ipv4.tcp_tw_reuse=1 "net.ipv4.ip_local_port_range=1024 65000"
$W/bin/netcube-lab sandbox exec --name $SB n1p2 -- taskset -c 1 $NCPERF serve $PORT & NSRV=$!
sleep 1
client() { # peer mode seconds
	case $1 in
	bare) ip netns exec $A taskset -c 1 $NCPERF $2 192.0.2.2 $PORT $3;;
	floor) ip netns exec $FA taskset -c 1 $NCPERF $2 10.99.0.2 $PORT $3;;
	nc) $W/bin/netcube-lab sandbox exec --name $SB n1p1 -- taskset -c 1 $NCPERF $2 10.244.1.2 $PORT $3;;
	esac
}
for p in bare floor nc; do client $p rr 0.5 >/dev/null || echo "warm-up $p failed"; done
for rep in 1 2 3; do
	for m in crr rr; do for p in bare floor nc; do
		echo "plain $rep $p-$m: $(client $p $m 5)"
	done; done
done
for m in crr rr; do
	client floor $m 10 > $OUT/perf-floor-$m.rate & cp=$!
	sleep 2
	perf record -q -C 1 -g -o $OUT/perf-floor-$m.data -- sleep 6 2>/dev/null
	wait $cp
	echo "perf floor-$m: $(cat $OUT/perf-floor-$m.rate)"
	perf report -i $OUT/perf-floor-$m.data --no-children --sort sym --stdio -g none 2>/dev/null > $OUT/perf-floor-$m.report.txt
done
echo "session $NAME end $(date -u '+%F %T')"
