/* netcube.c: the one BPF object of the datapath. It only gathers the entry
 * programs, so every map (and its generated Go type) is defined exactly once
 * and all programs share the same maps. */
#include "sock_lb.c"
#include "sock_destroy.c"
#include "ct_gc.c"
#include "tc_node.c"
#include "tc_pod.c"
#include "tc_overlay.c"
#include "xdp_node.c"

char __license[] SEC("license") = "Dual BSD/GPL";
