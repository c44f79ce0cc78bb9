#!/usr/bin/env bash
# Builds what the real-node sandbox and the upstream sig-network e2e suite
# need from the Go module proxy, pinned by hack/e2e/go.mod, into a cache keyed
# by that pinning: kubelet, kube-scheduler, kubectl (the suite runs it), agnhost and
# regression-issue-74839 (the suite's test images built here),
# e2e.test (the suite, `go test -c k8s.io/kubernetes/test/e2e`), ginkgo and
# CoreDNS (the cluster's DNS).
# Only missing binaries are built; a second run, or CI on the same machine,
# reuses them. Prints the directory holding the binaries on its last line.
set -euo pipefail
cd "$(dirname "$0")/e2e"
# The cluster DNS server (the suite reaches Services by name), built with
# its own go.mod: it pins Kubernetes libraries of its own.
COREDNS_VERSION=v1.15.0

key=$(cat go.mod go.sum | sha256sum | cut -c1-16)
dir="${NETCUBE_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netcube/e2e}/$key"
# name=package of every binary built with go build.
bins=(
  kubelet=k8s.io/kubernetes/cmd/kubelet
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler
  kubectl=k8s.io/kubernetes/cmd/kubectl
  agnhost=k8s.io/kubernetes/test/images/agnhost
  regression-issue-74839=k8s.io/kubernetes/test/images/regression-issue-74839
  ginkgo=github.com/onsi/ginkgo/v2/ginkgo
)
mkdir -p "$dir"
for b in "${bins[@]}"; do
  name=${b%%=*} pkg=${b#*=}
  if [ ! -x "$dir/$name" ]; then
    echo "build-e2e: building $name into $dir (takes minutes the first time)" >&2
    # The test images are scratch images: static, no cgo.
    CGO_ENABLED=0 GOFLAGS=-trimpath go build -o "$dir/$name.tmp.$$" "$pkg"
    mv "$dir/$name.tmp.$$" "$dir/$name"
  fi
done
# agnhost's porter serves TLS with the certificate its image carries.
if [ ! -f "$dir/localhost.crt" ]; then
  src=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/images/agnhost/porter
  cp "$src/localhost.crt" "$src/localhost.key" "$dir/"
  chmod 0644 "$dir/localhost.crt" "$dir/localhost.key"
fi
if [ ! -x "$dir/e2e.test" ]; then
  echo "build-e2e: building e2e.test into $dir (the largest build: several minutes)" >&2
  CGO_ENABLED=0 GOFLAGS=-trimpath go test -c -o "$dir/e2e.test.tmp.$$" k8s.io/kubernetes/test/e2e
  mv "$dir/e2e.test.tmp.$$" "$dir/e2e.test"
fi
if [ ! -x "$dir/coredns" ] || [ "$(cat "$dir/coredns.version" 2>/dev/null)" != "$COREDNS_VERSION" ]; then
  echo "build-e2e: building coredns $COREDNS_VERSION" >&2
  GOBIN="$dir" CGO_ENABLED=0 GOFLAGS=-trimpath go install "github.com/coredns/coredns@$COREDNS_VERSION"
  echo "$COREDNS_VERSION" > "$dir/coredns.version"
fi
echo "$dir"
