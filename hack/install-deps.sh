#!/usr/bin/env bash
# Installs every system dependency netcube needs on a fresh Debian 12 machine.
# Idempotent: packages already present are skipped; safe to run on every CI run.
set -euo pipefail

packages=(
  clang llvm            # BPF compiler (-target bpf) and llvm-strip used by bpf2go
  libbpf-dev            # bpf_helpers.h, bpf_endian.h
  linux-libc-dev        # uapi headers: linux/bpf.h, linux/if_ether.h, ...
  bpftool               # inspecting loaded programs and pinned maps
  iproute2              # ip netns, veth, tc
  iperf3                # throughput measurements in the sandbox
  util-linux            # taskset for pinning benchmark processes
  procps                # pkill/pgrep used by sandbox cleanup
  curl                  # HTTP requests from sandbox namespaces (health-check ports)
  iputils-ping          # ping: node -> pod reachability in the CNI tests, a pod's ping outside the cluster
  traceroute            # a pod's traceroute outside the cluster (ICMP errors translated back)
  containerd runc       # a real container runtime: images built here are imported and run
  busybox-static        # the shell and tools of the e2e suite's test images (agnhost, busybox)
  dash bind9-dnsutils   # the test image's shell (busybox's prefers its applets) and dig (DNS probes)
  wget netcat-openbsd   # the test image's wget (busybox's crashes) and nc (the suite's nc -v)
  containernetworking-plugins # loopback: what containerd's CRI runs for every pod's lo, on real nodes
  iptables nftables     # kube-proxy, the benchmark's baseline (iptables-nft, iptables-legacy, nftables modes)
  gcc                   # cc: the pause image's and the native load generator's C
  git                   # the upgrade test builds an earlier agent from history; reports name their commit
  linux-perf            # perf: the profiles the reports give (docs/benchmarks/*-profile.md)
  bird2                 # bird, birdc: a real BGP router that pkg/bgp's speaker peers with in its tests
  chromium              # a real browser, headless: renders netcube flows map's page in its tests
  # Part of every Debian system, listed so that every program the project
  # runs is named here (internal/hostdeps checks it):
  bash coreutils mount  # scripts, cat/test/timeout in tests, umount
  libc-bin dpkg         # ldd and getent (copied into test images), dpkg-query (internal/hostdeps)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  # iperf3 asks whether to start a daemon; answer no.
  echo "iperf3 iperf3/start_daemon boolean false" | $sudo_cmd debconf-set-selections
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "install-deps: all system packages present"
fi

# bpffs is where the agent pins maps and links; mount it if the host has not.
if ! mountpoint -q /sys/fs/bpf; then
  mount -t bpf bpf /sys/fs/bpf
fi

go version >/dev/null 2>&1 || { echo "install-deps: Go 1.26 is required (https://go.dev/dl)"; exit 1; }
