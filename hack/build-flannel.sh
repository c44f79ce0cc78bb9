#!/usr/bin/env bash
# Builds the pod-network benchmark's reference peer from the Go module
# proxy into a cache: flanneld (VXLAN backend, kube subnet manager) and the
# reference CNI plugins bridge and host-local, plus cnitool. Nothing of
# flannel is committed: its main imports the Tencent VPC backend, whose SDK
# modules the proxy does not serve, so the build uses a copy of flannel's
# module source with that one import (and its requirements) dropped.
# Prints the directory holding the binaries on its last line.
set -euo pipefail
FLANNEL=v0.28.10
PLUGINS=v1.9.1
CNI=v1.3.1
key=$(printf '%s %s %s %s' "$FLANNEL" "$PLUGINS" "$CNI" "$(sha256sum "$0" | cut -c1-16)" | sha256sum | cut -c1-16)
dir="${NETCUBE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netcube/flannel}/$key"
if [ -x "$dir/flanneld" ] && [ -x "$dir/bridge" ] && [ -x "$dir/host-local" ] && [ -x "$dir/cnitool" ]; then
  echo "build-flannel: cached in $dir" >&2
  echo "$dir"
  exit 0
fi
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$dir.tmp"
echo "build-flannel: flannel $FLANNEL (without the Tencent VPC backend)" >&2
src=$(go mod download -json "github.com/flannel-io/flannel@$FLANNEL" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
cp -r "$src" "$work/flannel"
chmod -R u+w "$work/flannel"
cd "$work/flannel"
sed -i '/flannel\/pkg\/backend\/tencentvpc"/d' main.go
rm -rf pkg/backend/tencentvpc
go mod edit -droprequire github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/common \
  -droprequire github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc
GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true
GOFLAGS="-mod=mod -trimpath" go build -o "$dir.tmp/flanneld" .
echo "build-flannel: bridge, host-local $PLUGINS; cnitool $CNI" >&2
GOBIN="$dir.tmp" GOFLAGS=-trimpath go install "github.com/containernetworking/plugins/plugins/main/bridge@$PLUGINS" \
  "github.com/containernetworking/plugins/plugins/ipam/host-local@$PLUGINS"
GOBIN="$dir.tmp" GOFLAGS=-trimpath go install "github.com/containernetworking/cni/cnitool@$CNI"
rm -rf "$dir" && mv "$dir.tmp" "$dir"
echo "$dir"
