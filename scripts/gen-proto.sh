#!/usr/bin/env bash
# Generate Python stubs for every proto under proto/ into the one generated package croupier_proto.
set -euo pipefail
cd "$(dirname "$0")/.."
out=libs/proto/src
# From scratch: stubs of a proto that was moved or removed must not linger and keep old imports working.
rm -rf "$out/croupier"
mkdir -p "$out"
protos=$(find proto -name '*.proto' | sort)
if [ -z "$protos" ]; then exit 0; fi
.venv/bin/python -m grpc_tools.protoc -Iproto --python_out="$out" --grpc_python_out="$out" --pyi_out="$out" $protos
