#!/usr/bin/env bash
# Local single-node Apache Kafka (KRaft, broker+controller in one JVM) for Croupier's
# integration/e2e tests and `make up`. No Docker: the broker is assembled from Maven
# Central jars (see pom.xml here) and run with the machine's Java 17.
#
# Usage: infra/kafka/kafka.sh install|start|stop|status|env
#
#   install  resolve the broker's runtime jars into the cache (skipped when complete)
#   start    install if needed, generate config, format storage once, start, wait until ready
#   stop     stop the broker this script started (SIGTERM, then SIGKILL after a grace period)
#   status   say whether it runs: exit 0 when a broker answers on the port, 3 when none
#            runs, 4 when our broker process is alive but not answering (yet)
#   env      print KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:<port>
#
# Environment:
#   CROUPIER_CACHE          jar cache, outside the repo   (default ~/.cache/croupier)
#   CROUPIER_STATE          state dir: config, data, logs (default /tmp/croupier-infra)
#   KAFKA_PORT              PLAINTEXT listener             (default 19092)
#   KAFKA_CONTROLLER_PORT   KRaft controller listener      (default 19093)
#   KAFKA_HEAP_OPTS         JVM heap                       (default -Xms256m -Xmx512m)
#   KAFKA_START_TIMEOUT     seconds to wait for readiness  (default 90)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

CACHE="${CROUPIER_CACHE:-$HOME/.cache/croupier}"
STATE_ROOT="${CROUPIER_STATE:-/tmp/croupier-infra}"
STATE="$STATE_ROOT/kafka"
HOST=127.0.0.1
PORT="${KAFKA_PORT:-19092}"
CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-19093}"
HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m}"
START_TIMEOUT="${KAFKA_START_TIMEOUT:-90}"
STOP_TIMEOUT=30

pom_prop() { sed -n "s:.*<$1>\(.*\)</$1>.*:\1:p" "$HERE/pom.xml" | head -n1; }
KAFKA_VERSION="$(pom_prop kafka.version)"
LIBS="$CACHE/kafka-$KAFKA_VERSION/libs"
MARKER="$LIBS/.complete"

PID_FILE="$STATE/kafka.pid"
PROPS="$STATE/server.properties"
DATA="$STATE/data"
LOGS="$STATE/logs"
CONSOLE="$LOGS/console.log"

log() { echo "[kafka] $*" >&2; }

# Serialise start/stop of this broker (several shells may call us at once). The daemon is
# launched with fds 8 and 9 closed so it never holds this lock (or infra.sh's).
lock() {
  mkdir -p "$STATE"
  exec 9>"$STATE/.lock"
  flock -w 180 9 || { echo "[kafka] ERROR: timed out waiting for $STATE/.lock" >&2; exit 1; }
}
die() { echo "[kafka] ERROR: $*" >&2; exit 1; }

python_bin() {
  if [[ -x "$REPO/.venv/bin/python" ]]; then echo "$REPO/.venv/bin/python"
  elif command -v python3 >/dev/null 2>&1; then command -v python3
  else die "no python3 found (needed for the readiness probe)"; fi
}

# 0 when a Kafka broker on $HOST:$PORT answers a Metadata request with a live broker.
answers() { "$(python_bin)" "$HERE/probe.py" "$HOST" "$PORT" "${1:-3}"; }

# 0 when something (anything) accepts TCP connections on $HOST:$1.
port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# PID recorded by us and still our broker (guards against PID reuse).
our_pid() {
  [[ -f "$PID_FILE" ]] || return 1
  local pid; pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "kafka.Kafka $PROPS" || return 1
  echo "$pid"
}

ensure_java() {
  if ! command -v java >/dev/null 2>&1; then
    log "java not found; installing openjdk-17-jre-headless (apt)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  fi
  local major
  major="$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)"
  [[ "${major:-0}" -ge 17 ]] || die "Kafka $KAFKA_VERSION needs Java 17+, found '${major:-?}'"
}

ensure_maven() {
  if ! command -v mvn >/dev/null 2>&1; then
    log "mvn not found; installing maven (apt)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null
  fi
}

cmd_install() {
  ensure_java
  if [[ -f "$MARKER" ]]; then
    log "Kafka $KAFKA_VERSION jars already in $LIBS"
    return 0
  fi
  ensure_maven
  log "resolving Kafka $KAFKA_VERSION runtime jars from Maven Central into $LIBS ..."
  local t0=$SECONDS
  # Resolve into a private folder, then move it in place: a half-done or concurrent
  # install never leaves a folder that looks complete.
  local tmp="$LIBS.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  (cd "$HERE" && mvn -B -q -Dstyle.color=never dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$tmp") >"$tmp.log" 2>&1 \
    || { cat "$tmp.log" >&2; rm -rf "$tmp" "$tmp.log"; die "mvn dependency:copy-dependencies failed"; }
  rm -f "$tmp.log"
  ls "$tmp"/kafka_2.13-"$KAFKA_VERSION".jar >/dev/null 2>&1 || die "kafka_2.13 jar missing in $tmp"
  ls "$tmp"/log4j-slf4j-impl-*.jar >/dev/null 2>&1 || die "log4j-slf4j-impl jar missing in $tmp"
  date -u +%FT%TZ >"$tmp/.complete"   # written last: its presence means the folder is complete
  if [[ -f "$MARKER" ]]; then rm -rf "$tmp"; else rm -rf "$LIBS"; mv "$tmp" "$LIBS"; fi
  log "installed $(find "$LIBS" -name '*.jar' | wc -l) jars in $((SECONDS - t0))s"
}

write_properties() {
  mkdir -p "$DATA" "$LOGS"
  cat >"$PROPS" <<EOF
# Generated by infra/kafka/kafka.sh on every start; edits are overwritten.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=$HOST:$CONTROLLER_PORT
listeners=PLAINTEXT://$HOST:$PORT,CONTROLLER://$HOST:$CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$HOST:$PORT,CONTROLLER://$HOST:$CONTROLLER_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$DATA

# Single node: internal topics cannot have 3 replicas (defaults 3/3/2 make consumer
# groups loop on COORDINATOR_NOT_AVAILABLE).
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
default.replication.factor=1
min.insync.replicas=1
# Tests: no 3 s wait before the first consumer-group rebalance.
group.initial.rebalance.delay.ms=0

num.partitions=4
auto.create.topics.enable=true
offsets.topic.num.partitions=4

# Small machine (2 cores).
num.network.threads=2
num.io.threads=4
log.cleaner.dedupe.buffer.size=33554432
log.retention.hours=24
EOF
}

cmd_start() {
  local pid
  if pid="$(our_pid)"; then
    if answers; then log "already running (pid $pid) on $HOST:$PORT"; return 0; fi
    log "pid $pid is alive but $HOST:$PORT does not answer yet; waiting"
    wait_ready "$pid"; return 0
  fi
  rm -f "$PID_FILE"
  if answers; then
    log "a Kafka broker not started by this script already answers on $HOST:$PORT; using it"
    return 0
  fi
  port_open "$PORT" && die "port $PORT is in use by something that is not a Kafka broker"
  port_open "$CONTROLLER_PORT" && die "controller port $CONTROLLER_PORT is already in use"

  cmd_install
  write_properties
  local cp="$LIBS/*"
  if [[ ! -f "$DATA/meta.properties" ]]; then
    local cluster_id
    cluster_id="$(java -cp "$cp" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n1)"
    [[ -n "$cluster_id" ]] || die "could not generate a cluster id"
    log "formatting storage in $DATA (cluster id $cluster_id)"
    java -Xmx256m -Dlog4j2.configurationFile="$HERE/log4j2.xml" -Dkafka.logs.dir="$LOGS" \
      -cp "$cp" kafka.tools.StorageTool format --standalone -t "$cluster_id" -c "$PROPS" \
      >"$LOGS/format.log" 2>&1 || { cat "$LOGS/format.log" >&2; die "storage format failed"; }
  fi

  log "starting Kafka $KAFKA_VERSION on $HOST:$PORT (controller $CONTROLLER_PORT), state in $STATE"
  # setsid: own session, so a Ctrl-C in the calling terminal does not reach the broker.
  # shellcheck disable=SC2086
  setsid java -server $HEAP_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$HERE/log4j2.xml" -Dkafka.logs.dir="$LOGS" \
    -cp "$cp" kafka.Kafka "$PROPS" >"$CONSOLE" 2>&1 </dev/null 8>&- 9>&- &
  pid=$!
  echo "$pid" >"$PID_FILE"
  wait_ready "$pid"
}

wait_ready() {
  local pid=$1 t0=$SECONDS
  while (( SECONDS - t0 < START_TIMEOUT )); do
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$PID_FILE"
      show_logs; die "broker (pid $pid) exited during startup"
    fi
    if answers 2; then
      log "ready on $HOST:$PORT (pid $pid) after $((SECONDS - t0))s"
      return 0
    fi
    sleep 0.5
  done
  show_logs
  die "broker (pid $pid) not ready after ${START_TIMEOUT}s; it is left running: '$0 stop' stops it"
}

show_logs() {
  local f
  for f in "$CONSOLE" "$LOGS/server.log"; do
    [[ -s "$f" ]] || continue
    echo "----- last lines of $f -----" >&2
    tail -n 40 "$f" >&2
  done
}

cmd_stop() {
  local pid
  if ! pid="$(our_pid)"; then
    rm -f "$PID_FILE"
    log "not running (no broker started by this script)"
    return 0
  fi
  log "stopping broker (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  local t0=$SECONDS
  while kill -0 "$pid" 2>/dev/null && (( SECONDS - t0 < STOP_TIMEOUT )); do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    log "still alive after ${STOP_TIMEOUT}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  fi
  rm -f "$PID_FILE"
  log "stopped in $((SECONDS - t0))s"
}

cmd_status() {
  local pid
  if pid="$(our_pid)"; then
    if answers; then echo "kafka: running (pid $pid) on $HOST:$PORT"; return 0; fi
    echo "kafka: starting or unresponsive (pid $pid), $HOST:$PORT not answering"; return 4
  fi
  if answers; then echo "kafka: a broker not started by this script answers on $HOST:$PORT"; return 0; fi
  echo "kafka: not running"; return 3
}

cmd_env() { echo "KAFKA_BOOTSTRAP_SERVERS=$HOST:$PORT"; }

case "${1:-}" in
  install) lock; cmd_install ;;
  start) lock; cmd_start ;;
  stop) lock; cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  *) echo "usage: $0 install|start|stop|status|env" >&2; exit 2 ;;
esac
