/* hook.h: the contract of a cube's packet hook (pkg/cube/hooks.go). The
 * entry programs call the registered cubes' hooks in registry order
 * (entry/cubes_gen.h), after parsing a packet and before the load
 * balancer; a hook returns CUBE_PASS to let the packet go on, or a tc
 * verdict (TC_ACT_SHOT, ...) to end the program with it. Hooks are inlined:
 * an entry program with no hooks is the same code as before. */
#pragma once
#include "common.h"
#include "parse.h"

#define CUBE_PASS (-2) /* not a tc verdict (TC_ACT_UNSPEC is -1) */

/* A to_pod hook that wants the packet to enter its pod through the pod
 * veth's qdisc (a queue that shapes it), and not straight into the pod as
 * the router hands packets otherwise (a redirect past every qdisc), sets
 * skb->mark to HOOK_MARK_VIA_VETH. The router then sends it out of the
 * veth, whose to_pod lets it through at once (it was admitted already)
 * and clears the mark. The router does the same for what a netkit pod
 * sends to a pod of this node (router_to_endpoint). A mark never comes
 * from a pod or the wire: the kernel clears it as a packet crosses network
 * namespaces (netkit: what the pod sends; to_pod_netkit clears what the
 * node sends); only the node's privileged processes could set it
 * (SO_MARK), as they can do anything to the node's pods. */
#define HOOK_MARK_VIA_VETH 0x4e43a5e7
