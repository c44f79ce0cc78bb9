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
