#!/usr/bin/env bash
# Builds sigs.k8s.io/kube-network-policies (SIG Network's reference
# NetworkPolicy implementation: nftables rules that queue each new
# connection's first packet to a userspace verdict over nfqueue), fetched
# from the Go module proxy, unpatched, into a cache keyed by its version and
# this script. `netcube-lab bench policy` and `bench policy-latency` run it
# beside netcube. Prints the directory holding kube-network-policies on its
# last line; a second run reuses it. Its source is never copied into the
# repository.
#
# v0.8.0 implements AdminNetworkPolicy and BaselineAdminNetworkPolicy
# v1alpha1 (--admin-network-policy, --baseline-admin-network-policy), not
# ClusterNetworkPolicy v1beta1: the benchmarks run it for NetworkPolicy.
set -euo pipefail
VERSION=${KNP_VERSION:-v0.8.0}
MODULE=sigs.k8s.io/kube-network-policies
script="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
key=$VERSION-$(sha256sum < "$script" | cut -c1-12)
dir="${NETCUBE_KNP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netcube/tools/kube-network-policies}/$key"
if [ -x "$dir/kube-network-policies" ]; then
  echo "$dir"
  exit 0
fi
echo "build-kube-network-policies: building $MODULE@$VERSION into $dir (a minute or two the first time)" >&2
# Outside any module: the version asked for, not one a go.mod pins.
json=$(cd / && GOFLAGS= go mod download -json "$MODULE@$VERSION")
src=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
if [ -z "$src" ] || [ ! -f "$src/cmd/main.go" ]; then
  echo "build-kube-network-policies: go mod download $MODULE@$VERSION gave no module directory:" >&2
  printf '%s\n' "$json" >&2
  exit 1
fi
mkdir -p "$dir"
# Its own go.mod and go.sum, as its release builds it (the module cache is
# read-only: the binary goes to the cache directory).
(cd "$src" && CGO_ENABLED=0 GOFLAGS=-trimpath go build -ldflags "-s -w" -o "$dir/kube-network-policies.tmp.$$" ./cmd)
mv "$dir/kube-network-policies.tmp.$$" "$dir/kube-network-policies"
echo "$VERSION" > "$dir/version"
echo "$dir"
