#!/usr/bin/env bash
# `make run`: the embedded server (all five services, one process, SQLite under ./var), a demo of
# every game against it over gRPC, then the server keeps serving until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
data=${CROUPIER_DATA:-var}
listen=${CROUPIER_LISTEN:-127.0.0.1:50051}
http=${CROUPIER_HTTP:-127.0.0.1:8080}
# The console is for the demo and the hint: warnings and errors only (LOG_LEVEL=INFO make run shows
# one JSON access line per call, as a deployed service logs).
rm -f "$data/serve.json"  # written by the server once it serves (and its secret exists)
LOG_LEVEL=${LOG_LEVEL:-WARNING} .venv/bin/croupier serve --data "$data" --listen "$listen" --http "$http" &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null' EXIT
trap 'exit 0' INT TERM
until [ -s "$data/serve.json" ]; do
  kill -0 $server 2>/dev/null || exit 1  # it could not start; it said why
  sleep 0.2
done
export CROUPIER_TOKEN=$(.venv/bin/croupier token demo-player --data "$data")
.venv/bin/croupier demo --target "$listen" --rounds 2
cat <<HINT

Croupier is serving on $listen (data in $data/).
Play in your browser: http://$http/   (sign in with any name: play money, every game, each round verified)
Or play a round from the terminal:
  export CROUPIER_TOKEN=\$(.venv/bin/croupier token alice --data $data)
  .venv/bin/croupier play casino-war --target $listen
Or with grpcurl (reflection is on):
  grpcurl -plaintext -H "authorization: Bearer \$CROUPIER_TOKEN" $listen croupier.v1.TableService/ListTables
Or with curl, over Connect (JSON):
  curl -H "authorization: Bearer \$CROUPIER_TOKEN" -H 'content-type: application/json' -d '{}' http://$http/croupier.v1.TableService/ListTables
Ctrl-C stops the server.
HINT
wait $server
