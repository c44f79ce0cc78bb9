// Package bench measures netcube in the sandbox with real tools: iperf3 for
// bulk throughput and request/response and connection-rate generators
// (lab/traffic in Go; lab/bench/native's ncperf in C, for the pod-network
// figures), clients and servers pinned to CPUs. Figures are ratios to a
// baseline measured back to back in the same run (pod->pod for Services;
// the real kube-proxy; the real flannel for the pod network), so a noisy
// machine shifts both sides alike. Benchmarks are not tests: they
// print figures and write a report; they assert nothing.
package bench
