#!/usr/bin/env bash
# Builds the real Kubernetes components netcube tests and benchmarks against
# (kube-apiserver, etcd, kube-controller-manager, and kube-proxy, the
# benchmark's baseline) from the
# Go module proxy, pinned by hack/tools/go.mod, into a cache
# keyed by that pinning, plus helm (to render and validate the chart): a
# second run, or CI on the same machine, reuses them; and the hubble CLI
# and hubble-relay (hack/tools/hubble, its own module). Prints the directory
# holding the binaries on its last line.
set -euo pipefail
cd "$(dirname "$0")/tools"
HELM_VERSION=v3.22.0

key=$(cat go.mod go.sum | sha256sum | cut -c1-16)
dir="${NETCUBE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netcube/tools}/$key"
# name=package of every binary; each one missing from the cache is built.
bins=(
  kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver
  etcd=go.etcd.io/etcd/server/v3
  kube-proxy=k8s.io/kubernetes/cmd/kube-proxy
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager
)
mkdir -p "$dir"
for b in "${bins[@]}"; do
  name=${b%%=*} pkg=${b#*=}
  if [ ! -x "$dir/$name" ]; then
    echo "build-tools: building $name into $dir (takes minutes the first time)" >&2
    # Memory, not CPU, limits a Kubernetes build on a small machine.
    GOFLAGS=-trimpath go build -o "$dir/$name.tmp" "$pkg"
    mv "$dir/$name.tmp" "$dir/$name"
  fi
done
# (helm built this way reports only its minor version: keep a marker.)
if [ ! -x "$dir/helm" ] || [ "$(cat "$dir/helm.version" 2>/dev/null)" != "$HELM_VERSION" ]; then
  echo "build-tools: building helm $HELM_VERSION" >&2
  # go install pkg@version builds helm with its own go.mod, not ours.
  GOBIN="$dir" GOFLAGS=-trimpath go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  echo "$HELM_VERSION" > "$dir/helm.version"
fi
# The hubble CLI (tests of netcube's Hubble API), from its own module:
# cilium's dependency graph never touches netcube's go.mod or hack/tools'.
hubble_key=$(cat hubble/go.mod hubble/go.sum | sha256sum | cut -c1-16)
version=$(sed -n 's/^\tgithub.com\/cilium\/cilium \(v[^ ]*\).*/\1/p' hubble/go.mod)
if [ ! -x "$dir/hubble" ] || [ "$(cat "$dir/hubble.version" 2>/dev/null)" != "$hubble_key" ]; then
  echo "build-tools: building hubble (cilium's CLI, hack/tools/hubble; takes minutes the first time)" >&2
  CGO_ENABLED=0 go build -C hubble -trimpath -tags osusergo \
    -ldflags "-s -w -X github.com/cilium/cilium/hubble/pkg.Version=$version" -o "$dir/hubble.tmp" github.com/cilium/cilium/hubble
  mv "$dir/hubble.tmp" "$dir/hubble"
  echo "$hubble_key" > "$dir/hubble.version"
fi
# hubble-relay: its own module beside the CLI's (hack/tools/hubble-relay),
# pinning the same cilium.
relay_key=$(cat hubble-relay/go.mod hubble-relay/go.sum | sha256sum | cut -c1-16)
relay_version=$(sed -n 's/^require github.com\/cilium\/cilium \(v[^ ]*\).*/\1/p; s/^\tgithub.com\/cilium\/cilium \(v[^ ]*\).*/\1/p' hubble-relay/go.mod | head -1)
if [ "$relay_version" != "$version" ]; then
  echo "build-tools: hack/tools/hubble-relay pins cilium $relay_version, hack/tools/hubble $version: make them one" >&2
  exit 1
fi
if [ ! -x "$dir/hubble-relay" ] || [ "$(cat "$dir/hubble-relay.version" 2>/dev/null)" != "$relay_key" ]; then
  echo "build-tools: building hubble-relay (cilium's, hack/tools/hubble-relay; takes minutes the first time)" >&2
  CGO_ENABLED=0 go build -C hubble-relay -trimpath -tags osusergo \
    -ldflags "-s -w" -o "$dir/hubble-relay.tmp" github.com/cilium/cilium/hubble-relay
  mv "$dir/hubble-relay.tmp" "$dir/hubble-relay"
  echo "$relay_key" > "$dir/hubble-relay.version"
fi
echo "$dir"
