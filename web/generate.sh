#!/usr/bin/env bash
# The Connect clients of the public services, generated from proto/ with protoc-gen-es (protobuf-es v2:
# the *_pb.ts files hold the messages and the service descriptors connect-web calls). protoc is the
# repo's own (grpc_tools in .venv), so nothing but npm packages is needed. Internal services are left out.
set -euo pipefail
cd "$(dirname "$0")"
rm -rf src/gen && mkdir -p src/gen
protos=$(cd ../proto && grep -L '^package croupier\.internal' $(find croupier -name '*.proto' ! -name 'internal.proto' | sort) || true)
../.venv/bin/python -c '
import sys
from importlib.resources import files
from grpc_tools import protoc
sys.exit(protoc.main(["protoc", "-I../proto", "-I" + str(files("grpc_tools") / "_proto"),
                      "--plugin=protoc-gen-es=./node_modules/.bin/protoc-gen-es", "--es_out=src/gen", "--es_opt=target=ts",
                      *sys.argv[1:]]))' $protos
