#!/usr/bin/env bash
# `make up` / `make down`: the distributed mode on this machine — a real Kafka broker and PostgreSQL
# (scripts/infra.sh), migrations, and the five services as separate processes (croupier serve SERVICE).
set -euo pipefail
cd "$(dirname "$0")/.."
state=${CROUPIER_STATE:-/tmp/croupier-infra}/stack
mkdir -p "$state"
declare -A PORTS=([game]=${GAME_PORT:-50051} [wallet]=${WALLET_PORT:-50052} [shuffler]=${SHUFFLER_PORT:-50053}
                  [dealer]=${DEALER_PORT:-50054} [commission]=${COMMISSION_PORT:-50055})
ORDER=(shuffler dealer wallet commission game)

stack_env() {
  eval "$(bash scripts/infra.sh env)"
  export KAFKA_BOOTSTRAP_SERVERS DATABASE_URL
  [ -f "$state/secret.key" ] || (umask 077; .venv/bin/python -c 'import secrets; print(secrets.token_hex(32))' > "$state/secret.key")
  export CROUPIER_TOKEN_SECRET=$(cat "$state/secret.key")
  # A local stack: the HS256 dev secret signs every token and the services' calls (no mTLS).
  export CROUPIER_DEV_MODE=true
  export LISTEN_HOST=127.0.0.1
  for svc in "${ORDER[@]}"; do
    export "${svc^^}_SERVICE_ADDR=127.0.0.1:${PORTS[$svc]}"
  done
}

wait_healthy() {  # service port
  .venv/bin/python - "$1" "$2" <<'PY'
import sys, time, grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
service, port = sys.argv[1], sys.argv[2]
deadline = time.monotonic() + 60
while True:
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2).status
        if status == health_pb2.HealthCheckResponse.SERVING:
            break
    except grpc.RpcError:
        pass
    if time.monotonic() > deadline:
        sys.exit(f"{service} did not become healthy on port {port}")
    time.sleep(0.2)
PY
}

up() {
  bash scripts/infra.sh up
  stack_env
  .venv/bin/croupier migrate
  for svc in "${ORDER[@]}"; do
    pidfile="$state/$svc.pid"
    if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then continue; fi
    PORT=${PORTS[$svc]} nohup .venv/bin/croupier serve "$svc" > "$state/$svc.log" 2>&1 &
    echo $! > "$pidfile"
  done
  for svc in "${ORDER[@]}"; do
    wait_healthy "$svc" "${PORTS[$svc]}" || { tail -20 "$state/$svc.log"; exit 1; }
  done
  cp "$state/secret.key" "$state/../secret.key" 2>/dev/null || true
  cat <<HINT
Croupier is up: game 127.0.0.1:${PORTS[game]}, wallet 127.0.0.1:${PORTS[wallet]} (logs in $state/).
  export CROUPIER_TOKEN=\$(.venv/bin/croupier token alice --secret-file $state/secret.key)
  .venv/bin/croupier demo --target 127.0.0.1:${PORTS[game]} --wallet-target 127.0.0.1:${PORTS[wallet]}
make down stops it.
HINT
}

down() {
  for svc in game commission wallet dealer shuffler; do
    pidfile="$state/$svc.pid"
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
  done
  bash scripts/infra.sh down
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) stack_env; env | grep -E '^(KAFKA_BOOTSTRAP_SERVERS|DATABASE_URL|CROUPIER_TOKEN_SECRET|CROUPIER_DEV_MODE|[A-Z]+_SERVICE_ADDR)=' ;;
  *) echo "usage: $0 up|down|env" >&2; exit 2 ;;
esac
