#!/usr/bin/env bash
# Local infrastructure for Croupier: a real single-node Kafka broker and a real PostgreSQL
# server on this machine (no Docker), via infra/kafka/kafka.sh and infra/postgres/postgres.sh.
#
# Usage: scripts/infra.sh up|down|status|env
#
#   up      install what is missing, start Kafka and PostgreSQL, wait until both are ready.
#           Records in the state dir which ones THIS command started.
#   down    stop only what `up` started; a broker/cluster that was already running before
#           `up` is left running. Safe to call when nothing runs (e.g. after a failed `up`).
#   status  state of both services
#   env     the connection settings, one KEY=VALUE a line:
#             KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:19092
#             DATABASE_URL=postgresql+psycopg://croupier:croupier@127.0.0.1:15432/croupier
#             PGBENCH=/usr/lib/postgresql/15/bin/pgbench
#           e.g. `set -a; eval "$(scripts/infra.sh env)"; set +a`
#
# Meant for `make test` (up; tests; down even when the tests fail) and `make up`/`make down`.
# Environment: CROUPIER_STATE, CROUPIER_CACHE, KAFKA_PORT, KAFKA_CONTROLLER_PORT, PG_PORT
# (see the two service scripts).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE_ROOT="${CROUPIER_STATE:-/tmp/croupier-infra}"
RECORD="$STATE_ROOT/started-by-infra"
SERVICES=(postgres kafka)

svc() { # svc NAME ARGS...
  local name=$1; shift
  bash "$ROOT/infra/$name/$name.sh" "$@"
}

log() { echo "[infra] $*" >&2; }

recorded() { [[ -f "$RECORD" ]] && grep -qx "$1" "$RECORD"; }

cmd_up() {
  mkdir -p "$STATE_ROOT"
  local name t0=$SECONDS
  for name in "${SERVICES[@]}"; do
    if recorded "$name"; then   # started by an earlier `up` (maybe one that failed): idempotent
      svc "$name" start
      continue
    fi
    local rc=0
    svc "$name" status >/dev/null 2>&1 || rc=$?
    case $rc in
      0) log "$name is already running (not started by infra.sh): using it; 'down' leaves it running" ;;
      4) log "$name is being started by someone else: waiting for it; 'down' leaves it running"
         svc "$name" start ;;
      *) # Recorded before starting, so `down` also cleans up after a start that failed midway.
         echo "$name" >>"$RECORD"
         svc "$name" start ;;
    esac
  done
  log "up in $((SECONDS - t0))s"
  cmd_env
}

cmd_down() {
  if [[ ! -s "$RECORD" ]]; then
    log "nothing started by infra.sh to stop"
    rm -f "$RECORD"
    return 0
  fi
  local name rc=0
  # Reverse order of start: Kafka first, then PostgreSQL.
  for name in $(tac "$RECORD"); do
    svc "$name" stop || { log "failed to stop $name"; rc=1; }
  done
  [[ $rc -ne 0 ]] || rm -f "$RECORD"
  return $rc
}

cmd_status() {
  local name rc=0
  for name in "${SERVICES[@]}"; do
    svc "$name" status || rc=3
    if recorded "$name"; then echo "  ($name was started by 'infra.sh up')"; fi
  done
  return $rc
}

cmd_env() {
  svc kafka env
  svc postgres env
}

# One up/down at a time (the record file is shared). Fd 8; the service scripts close it
# for the daemons they launch.
lock() {
  mkdir -p "$STATE_ROOT"
  exec 8>"$STATE_ROOT/.infra.lock"
  flock -w 300 8 || { log "ERROR: timed out waiting for $STATE_ROOT/.infra.lock"; exit 1; }
}

case "${1:-}" in
  up) lock; cmd_up ;;
  down) lock; cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  *) echo "usage: $0 up|down|status|env" >&2; exit 2 ;;
esac
