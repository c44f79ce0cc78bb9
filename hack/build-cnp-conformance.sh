#!/usr/bin/env bash
# Builds the upstream ClusterNetworkPolicy conformance suite of
# sigs.k8s.io/network-policy-api (`go test -c ./conformance`), fetched from
# the Go module proxy, into a cache keyed by its version and this script
# (the patch below is part of the key). Prints the directory holding
# conformance.test on its last line; a second run reuses it.
#
# One patch, and no test's logic is touched: the suite's base manifests
# (conformance/base/manifests.yaml, embedded in the binary) run every server
# pod with two containers of `/agnhost porter` serving SCTP ports (9003,
# 9005; two host ports on the host-network pods). Where the kernel has no
# SCTP, porter exits at once ("Failed to listen SCTP ... protocol not
# supported"), the containers crash-loop and no pod of the suite ever gets
# ready, so not one test runs. The patched command runs porter as before
# and, only when it exits and the kernel has no SCTP (no
# /proc/sys/net/sctp after porter's socket() had the module loaded if
# there is one), pauses instead of exiting: the pod is ready, every TCP
# and UDP server is unchanged, and the SCTP tests still probe SCTP and
# fail here, as they must (netcube-lab cnp names them). With SCTP, porter
# serves or its failure fails the container as upstream's does.
set -euo pipefail
VERSION=${CNP_CONFORMANCE_VERSION:-v0.3.0}
MODULE=sigs.k8s.io/network-policy-api
script="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
key=$VERSION-$(sha256sum < "$script" | cut -c1-12)
dir="${NETCUBE_CNP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netcube/cnp-conformance}/$key"
if [ -x "$dir/conformance.test" ]; then
  echo "$dir"
  exit 0
fi
echo "build-cnp-conformance: building $MODULE@$VERSION's suite into $dir (about two minutes the first time)" >&2
# Outside any module: the version asked for, not one a go.mod pins.
json=$(cd / && GOFLAGS= go mod download -json "$MODULE@$VERSION")
src=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
if [ -z "$src" ] || [ ! -f "$src/conformance/base/manifests.yaml" ]; then
  echo "build-cnp-conformance: go mod download $MODULE@$VERSION gave no module directory:" >&2
  printf '%s\n' "$json" >&2
  exit 1
fi
mkdir -p "$dir"
rm -rf "$dir/src"
cp -r "$src" "$dir/src"
chmod -R u+w "$dir/src"
manifests="$dir/src/conformance/base/manifests.yaml"
porter='command: ["/bin/bash", "-c", "/agnhost porter"]'
fallback='command: ["/bin/bash", "-c", "/agnhost porter || { test -d /proc/sys/net/sctp \&\& exit 1; echo no SCTP in this kernel: porter cannot serve, pausing >\&2; exec /agnhost pause; }"]'
want=$(grep -cF "$porter" "$manifests" || true)
# Five StatefulSets, two SCTP servers each: a suite that changed them needs
# this patch looked at again, not applied blindly.
if [ "$want" != 10 ]; then
  echo "build-cnp-conformance: expected 10 porter containers in conformance/base/manifests.yaml of $VERSION, found $want: review the patch" >&2
  exit 1
fi
sed -i "s#$(printf '%s' "$porter" | sed 's/[][\.*^$#]/\\&/g')#$fallback#" "$manifests"
if [ "$(grep -c 'exec /agnhost pause; }' "$manifests")" != 10 ]; then
  echo "build-cnp-conformance: the porter patch did not apply to all 10 containers" >&2
  exit 1
fi
diff -u "$src/conformance/base/manifests.yaml" "$manifests" | sed "s|$src|a|; s|$dir/src|b|" > "$dir/manifests.patch" || true
# The images the suite's pods run (the sandbox must have imported each).
grep -ho 'image: [^ ]*' "$dir/src/conformance/base/"*.yaml | sed 's/^image: //' | sort -u > "$dir/images.txt"
(cd "$dir/src" && CGO_ENABLED=0 GOFLAGS=-trimpath go test -c -o "$dir/conformance.test.tmp.$$" ./conformance)
mv "$dir/conformance.test.tmp.$$" "$dir/conformance.test"
echo "$VERSION" > "$dir/version"
echo "$dir"
