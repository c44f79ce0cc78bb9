// Package bench measures netcube in the sandbox with real tools: iperf3 for
// bulk throughput and netcube's own request/response and connection-rate
// generators (pkg/traffic), clients and servers pinned to CPUs. Figures are
// ratios to the pod->pod baseline measured back to back in the same run, so
// a noisy machine shifts both sides alike. Benchmarks are not tests: they
// print figures and write a report; they assert nothing.
package bench
