#!/usr/bin/env bash
# `make run`: the embedded server (all five services, one process, SQLite under ./var), a demo of
# every game against it over gRPC, then the server keeps serving until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
data=${CROUPIER_DATA:-var}
listen=${CROUPIER_LISTEN:-127.0.0.1:50051}
# The console is for the demo and the hint: warnings and errors only (LOG_LEVEL=INFO make run shows
# one JSON access line per call, as a deployed service logs).
LOG_LEVEL=${LOG_LEVEL:-WARNING} .venv/bin/croupier serve --data "$data" --listen "$listen" &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null' EXIT
trap 'exit 0' INT TERM
export CROUPIER_TOKEN=$(.venv/bin/croupier token demo-player --data "$data")
.venv/bin/croupier demo --target "$listen" --rounds 2
cat <<HINT

Croupier is serving on $listen (data in $data/). Play a round yourself:
  export CROUPIER_TOKEN=\$(.venv/bin/croupier token alice --data $data)
  .venv/bin/croupier play casino-war --target $listen
Or with grpcurl (reflection is on):
  grpcurl -plaintext -H "authorization: Bearer \$CROUPIER_TOKEN" $listen croupier.v1.TableService/ListTables
Ctrl-C stops the server.
HINT
wait $server
