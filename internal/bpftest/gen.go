// Package bpftest runs the cubes' C headers one operation at a time
// (bpf/test/headers.c) with BPF_PROG_RUN: conntrack, SNAT port
// allocation, the flow hash and session affinity, with the clock and the
// random numbers under the test's control; and it measures what composing
// cubes by tail calls costs against inlined calls.
package bpftest

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I../../bpf -I/usr/include/x86_64-linux-gnu" -target bpfel -go-package bpftest -type test_op -type snat_ports -type flow -type nc_addr -type ct_entry -type lb_svc_val -type ct_dir -type ct_flags -type lb_svc_flags -type lb_svc_key -type lb_affinity_match_key bpf ../../bpf/test/headers.c
