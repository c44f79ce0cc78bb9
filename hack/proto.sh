#!/usr/bin/env bash
# Regenerates pkg/hubble/{flowpb,observerpb,peerpb} from api/hubble/*.proto with buf
# and the protobuf Go plugins, built from the Go module proxy at pinned
# versions into a cache (the generated code is committed: building netcube
# needs none of this).
set -euo pipefail
BUF=v1.75.0 PROTOC_GEN_GO=v1.36.12 PROTOC_GEN_GO_GRPC=v1.6.2
dir="${NETCUBE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netcube/tools}/proto-$BUF-$PROTOC_GEN_GO-$PROTOC_GEN_GO_GRPC"
mkdir -p "$dir"
for t in github.com/bufbuild/buf/cmd/buf@$BUF google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO \
         google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC; do
  name=$(basename "${t%@*}")
  if [ ! -x "$dir/$name" ]; then
    echo "proto: building $name into $dir" >&2
    GOBIN="$dir" GOFLAGS=-trimpath go install "$t"
  fi
done
cd "$(dirname "$0")/../api/hubble"
PATH="$dir:$PATH" buf generate
echo "proto: regenerated pkg/hubble/flowpb, observerpb and peerpb" >&2
