#!/usr/bin/env bash
# Kafka benchmark (issue 15): a sysbench oltp_write_only backlog turned into
# Kafka change events by sluice's Kafka sink and, in the same run, by the
# peer: Debezium's MariaDB connector 2.7.0.Final under Kafka Connect 3.9.1
# standalone (jars from Maven Central), both writing to one broker (the
# Kafka sandbox). Debezium 2.7's MySQL connector no longer reads MariaDB;
# its MariaDB connector (io.debezium:debezium-connector-mariadb) does.
#
# Flow: a source sandbox, sysbench prepare, then Debezium is "primed": Connect
# runs the connector once with snapshot.mode=no_data (schema only, no rows),
# which records the source's binlog position in its offsets file and the
# tables' schema in its schema history file, and is stopped. Then sysbench
# writes TXNS transactions (the backlog). Each round then runs each peer
# ALONE on the whole backlog, order alternating: Debezium from copies of
# the primed offsets and history (Connect resumes from its offset, as after
# any restart), sluice as a new task starting at the position Debezium's
# snapshot recorded. bench/kafka (kafka-bench) starts the peer, reads its
# topics with franz-go (read_committed for sluice, whose events are
# transactional) and stops when it has seen as many distinct row changes as
# mariadb-binlog counts in the backlog.
#
# Then, unless LIVE_SECS=0, a live row: both peers run at once (Debezium from
# where its last round stopped, sluice from the current position) while
# sysbench runs LIVE_SECS at LIVE_RATE TPS and a writer inserts a heartbeat
# row (its insert time in µs) every 10 ms: the delay is the consumer's
# arrival time minus that time.
#
# Env: TXNS (100000) ROUNDS (3) THREADS (8: sysbench's) TABLES (4) TABLE_SIZE (10000)
#      LIVE_SECS (30; 0: no live row) LIVE_RATE (1000 TPS) BUFFER_POOL (512M)
#      SLUICE (bin/sluice) OUT (bench/out/kafka.md) TIMEOUT (15m per peer and round)
#      DEBEZIUM (1; 0: sluice alone, from the binlog position before the
#      backlog, no live row: for comparing sluice builds, with SLUICE_B)
#      SLUICE_B (unset; other sluice binaries, space-separated, each run in
#      every round as a peer named after its file (sluice-bN if that is
#      "sluice") on topics sbN.*: an A/B of builds in the same run)
#      WARMUP (1; 0: none): a round run before the measured ones, each peer
#      once on the same backlog, not counted: the broker is one JVM shared by the peers,
#      and its first minutes of a new load (JIT compilation, page cache) were
#      slowest for whichever peer ran first (every peer's rate rose over
#      the rounds of the earlier runs, docs/benchmarks/kafka.md)
set -euo pipefail

if [ -z "${SLUICE_BENCH_LOCKED:-}" ]; then
  export SLUICE_BENCH_LOCKED=1
  # -o: the servers the script starts must not inherit (and keep) the lock.
  exec flock -o /tmp/sluice-bench.lock "$0" "$@"
fi

cd "$(dirname "$0")/.."
TXNS=${TXNS:-100000}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-8}
TABLES=${TABLES:-4}
TABLE_SIZE=${TABLE_SIZE:-10000}
LIVE_SECS=${LIVE_SECS:-30}
LIVE_RATE=${LIVE_RATE:-1000}
BUFFER_POOL=${BUFFER_POOL:-512M}
SLUICE=${SLUICE:-$PWD/bin/sluice}
OUT=${OUT:-$PWD/bench/out/kafka.md}
TIMEOUT=${TIMEOUT:-15m}
DEBEZIUM=${DEBEZIUM:-1}
SLUICE_B=${SLUICE_B:-}
WARMUP=${WARMUP:-1}

for tool in java mvn sysbench mariadb mariadb-binlog go; do
  command -v "$tool" >/dev/null || { echo "bench-kafka: $tool is missing (run 'make deps')" >&2; exit 2; }
done
[ -x "$SLUICE" ] || { echo "bench-kafka: $SLUICE is missing (run 'make build')" >&2; exit 2; }
read -r -a SLUICE_BS <<<"$SLUICE_B"
for b in "${SLUICE_BS[@]}"; do
  [ -x "$b" ] || { echo "bench-kafka: SLUICE_B: $b is not an executable" >&2; exit 2; }
done
case "$DEBEZIUM" in 0|1) ;; *) echo "bench-kafka: DEBEZIUM=$DEBEZIUM: give 0 or 1" >&2; exit 2 ;; esac
for v in TXNS ROUNDS THREADS TABLES TABLE_SIZE LIVE_SECS LIVE_RATE WARMUP; do
  case "${!v}" in ''|*[!0-9]*) echo "bench-kafka: $v=${!v}: give a whole number" >&2; exit 2 ;; esac
done
case "$WARMUP" in 0|1) ;; *) echo "bench-kafka: WARMUP=$WARMUP: give 0 or 1" >&2; exit 2 ;; esac
[ "$TXNS" -gt 0 ] && [ "$ROUNDS" -gt 0 ] || { echo "bench-kafka: TXNS and ROUNDS must be at least 1" >&2; exit 2; }

umask 077
WORK=$(mktemp -d /tmp/sluice-kafka.XXXXXX)
export SLUICE_HOME=$WORK/home
SANDBOXES=()
KAFKA=""
cleanup() {
  for n in "${SANDBOXES[@]}"; do "$SLUICE" sandbox down --name "$n" --purge >/dev/null 2>&1 || true; done
  [ -z "$KAFKA" ] || "$SLUICE" sandbox kafka down --name "$KAFKA" --purge >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
  local p
  while :; do
    p=$(( (RANDOM % 20000) + 20000 ))
    ss -ltn "( sport = :$p )" 2>/dev/null | grep -q ":$p" || { echo "$p"; return; }
  done
}
sql() { local port=$1; shift; mariadb -h127.0.0.1 -P"$port" -uroot -N -s -e "$*"; }
# rows FILE POS: the row changes in the sbtest tables from FILE:POS to the
# end of the binlog, as mariadb-binlog decodes them (one "### INSERT",
# "### UPDATE" or "### DELETE" line per row).
rows() {
  mariadb-binlog --read-from-remote-server -h127.0.0.1 -P"$SRC_PORT" -uroot --start-position="$2" --to-last-log \
    --base64-output=decode-rows -v "$1" | grep -c '^### \(INSERT INTO\|UPDATE\|DELETE FROM\) `sbtest`' || true
}

COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
go build -o "$WORK/kafka-bench" ./bench/kafka
echo "== fetching Kafka Connect and Debezium jars (once; cached)"
LIBS=$("$WORK/kafka-bench" libs)
JSON=$WORK/kafka.jsonl
: >"$JSON"
mkdir -p "$(dirname "$OUT")"

SRC_PORT=$(free_port); KAFKA_PORT=$(free_port); REST_PORT=$(free_port)
echo "== source sandbox :$SRC_PORT (innodb_buffer_pool_size=$BUFFER_POOL), Kafka sandbox :$KAFKA_PORT"
SANDBOXES+=(kafka_src)
# The backlog is written with relaxed durability (no fsync per commit):
# writing it is not what is measured, and both peers read the same binlog.
"$SLUICE" sandbox up --name kafka_src --port "$SRC_PORT" --buffer-pool "$BUFFER_POOL" \
  --option innodb_flush_log_at_trx_commit=2 --option sync_binlog=0 >/dev/null
KAFKA=kafka_broker
"$SLUICE" sandbox kafka up --name "$KAFKA" --port "$KAFKA_PORT" >/dev/null
BROKER=127.0.0.1:$KAFKA_PORT
sql "$SRC_PORT" "CREATE DATABASE sbtest; CREATE DATABASE bench;
  CREATE TABLE bench.heartbeat (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, ts BIGINT NOT NULL, mark TINYINT NOT NULL)"
SB=(--tables="$TABLES" --table-size="$TABLE_SIZE" --mysql-host=127.0.0.1 --mysql-port="$SRC_PORT" --mysql-user=root --mysql-db=sbtest --db-driver=mysql)
sysbench oltp_write_only "${SB[@]}" --threads="$TABLES" prepare >/dev/null

# Debezium under Connect standalone: the worker and the connector as
# properties files; JsonConverter without schemas (sluice's default
# schema: false); offsets and schema history in files, so that a round can
# start from the primed copies. Connect's JVM flags are connect-standalone.sh's.
DBZ=$WORK/dbz
mkdir -p "$DBZ"
cat >"$DBZ/worker.properties" <<EOF
bootstrap.servers=$BROKER
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=false
value.converter.schemas.enable=false
offset.storage.file.filename=$DBZ/offsets.dat
listeners=http://127.0.0.1:$REST_PORT
plugin.discovery=only_scan
EOF
dbz_props() { # snapshot-mode
  cat >"$DBZ/dbz.properties" <<EOF
name=dbz
connector.class=io.debezium.connector.mariadb.MariaDbConnector
tasks.max=1
database.hostname=127.0.0.1
database.port=$SRC_PORT
database.user=root
database.password=
database.ssl.mode=disabled
database.server.id=5401
topic.prefix=dbz
database.include.list=sbtest,bench
snapshot.mode=$1
schema.history.internal=io.debezium.storage.file.history.FileSchemaHistory
schema.history.internal.file.filename=$DBZ/history.dat
EOF
}
CONNECT="java -Xms256M -Xmx2G -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true -cp '$LIBS/*' org.apache.kafka.connect.cli.ConnectStandalone $DBZ/worker.properties $DBZ/dbz.properties"

if [ "$DEBEZIUM" = 0 ]; then
  read -r F0 P0 _ < <(sql "$SRC_PORT" "SHOW MASTER STATUS")
else
echo "== priming Debezium (snapshot.mode=no_data: the schema and the binlog position, no rows)"
dbz_props no_data
sh -c "exec $CONNECT" >"$DBZ/prime.log" 2>&1 &
PRIME=$!
for _ in $(seq 1 1800); do
  grep -q "Keepalive thread is running" "$DBZ/prime.log" && break
  kill -0 "$PRIME" 2>/dev/null || { tail -20 "$DBZ/prime.log" >&2; echo "bench-kafka: Kafka Connect exited while priming (log above)" >&2; exit 2; }
  sleep 0.1
done
# A graceful stop (SIGTERM) commits the task's offsets to the file.
kill "$PRIME"; wait "$PRIME" || true
[ -s "$DBZ/offsets.dat" ] || { tail -20 "$DBZ/prime.log" >&2; echo "bench-kafka: Debezium recorded no offset while priming (log above)" >&2; exit 2; }
read -r F0 P0 < <(sed -n "s/.*using binlog '\([^']*\)' at position '\([0-9]*\)'.*/\1 \2/p" "$DBZ/prime.log" | tail -1)
[ -n "${P0:-}" ] || { echo "bench-kafka: no snapshot position in Debezium's log ($DBZ/prime.log)" >&2; exit 2; }
cp "$DBZ/offsets.dat" "$DBZ/offsets.prime"; cp "$DBZ/history.dat" "$DBZ/history.prime"
dbz_props no_data # with an offset, Connect resumes from it: no snapshot
fi

echo "== backlog: sysbench oltp_write_only, $TXNS transactions at $THREADS threads, from $F0:$P0"
SBOUT=$(sysbench oltp_write_only "${SB[@]}" --threads="$THREADS" --events="$TXNS" --time=0 run)
TPS=$(sed -n 's/.*transactions:.*(\([0-9.]*\) per sec.*/\1/p' <<<"$SBOUT")
N=$(rows "$F0" "$P0")
read -r F1 P1 _ < <(sql "$SRC_PORT" "SHOW MASTER STATUS")
echo "   $N row changes ($F0:$P0 to $F1:$P1), written at $TPS TPS"

KB=("$WORK/kafka-bench" run -brokers "$BROKER" -tables "$TABLES" -json "$JSON" -timeout "$TIMEOUT")
run_debezium() { # round
  cp "$DBZ/offsets.prime" "$DBZ/offsets.dat"; cp "$DBZ/history.prime" "$DBZ/history.dat"
  "${KB[@]}" -part backlog -round "$1" -expect "$N" -peer "name=debezium,prefix=dbz,committed=0,log=$DBZ/round$1.log,cmd=$CONNECT"
}
sluice_task() { # name file pos [peer prefix binary]
  local peer=${4:-sluice} prefix=${5:-sk} bin=${6:-$SLUICE}
  mkdir -p "$WORK/$1"
  cat >"$WORK/$1/task.yaml" <<EOF
name: $1
dir: $WORK/$1/state
source: {host: 127.0.0.1, port: $SRC_PORT, user: root, password: ""}
sink:
  kafka: {brokers: [$BROKER], topic-prefix: $prefix}
tables: {include: ["sbtest.*", "bench.*"]}
incremental: {binlog-file: $2, binlog-pos: $3, metrics-addr: ""}
EOF
  echo "name=$peer,prefix=$prefix,committed=1,log=$WORK/$1/sluice.log,cmd=$bin migrate --config $WORK/$1/task.yaml --mode incremental"
}
run_sluice() { # round
  "${KB[@]}" -part backlog -round "$1" -expect "$N" -peer "$(sluice_task "sk$1" "$F0" "$P0")"
}
run_sluice_b() { # round
  local i=0 b name
  for b in "${SLUICE_BS[@]}"; do
    i=$((i + 1)); name=$(basename "$b")
    [ "$name" != sluice ] || name=sluice-b$i
    "${KB[@]}" -part backlog -round "$1" -expect "$N" -peer "$(sluice_task "sb${i}r$1" "$F0" "$P0" "$name" "sb$i" "$b")"
  done
}
run_peer() { # round peer
  case $2 in
    sluice) run_sluice "$1" ;;
    sluice-b) run_sluice_b "$1" ;;
    debezium) [ "$DEBEZIUM" = 0 ] || run_debezium "$1" ;;
  esac
}
# The warm-up rounds' results go to a file of their own, left out of the tables.
MEASURED=("${KB[@]}")
KB=("$WORK/kafka-bench" run -brokers "$BROKER" -tables "$TABLES" -json "$WORK/warmup.jsonl" -timeout "$TIMEOUT")
if [ "$WARMUP" = 1 ]; then
  echo "== warm-up round (not counted): debezium, then the others"; run_peer 0 debezium; run_peer 0 sluice-b; run_peer 0 sluice
fi
KB=("${MEASURED[@]}")
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then
    echo "== round $r/$ROUNDS: sluice, then the others"; run_peer "$r" sluice; run_peer "$r" sluice-b; run_peer "$r" debezium
  else
    echo "== round $r/$ROUNDS: the others, then sluice"; run_peer "$r" debezium; run_peer "$r" sluice-b; run_peer "$r" sluice
  fi
done

if [ "$LIVE_SECS" -gt 0 ] && [ "$DEBEZIUM" = 1 ]; then
  read -r F2 P2 _ < <(sql "$SRC_PORT" "SHOW MASTER STATUS")
  echo "== live: both peers at once, sysbench oltp_write_only ${LIVE_SECS}s at $LIVE_RATE TPS, heartbeats every 10 ms"
  # Debezium resumes from where its last round stopped (the end of the
  # backlog, which is F2:P2), sluice starts there as a new task.
  "${KB[@]}" -part live -timeout "$TIMEOUT" \
    -peer "$(sluice_task sklive "$F2" "$P2")" \
    -peer "name=debezium,prefix=dbz,committed=0,log=$DBZ/live.log,cmd=$CONNECT" \
    -heartbeat "root@tcp(127.0.0.1:$SRC_PORT)/" \
    -load "sysbench oltp_write_only ${SB[*]} --threads=$THREADS --time=$LIVE_SECS --rate=$LIVE_RATE run" \
    -count "mariadb-binlog --read-from-remote-server -h127.0.0.1 -P$SRC_PORT -uroot --start-position=$P2 --to-last-log --base64-output=decode-rows -v $F2 | grep -c '^### \(INSERT INTO\|UPDATE\|DELETE FROM\) \`sbtest\`'"
fi

{
  echo "## make bench-kafka, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $COMMIT"
  echo
  echo "\`TXNS=$TXNS ROUNDS=$ROUNDS WARMUP=$WARMUP THREADS=$THREADS TABLES=$TABLES TABLE_SIZE=$TABLE_SIZE LIVE_SECS=$LIVE_SECS LIVE_RATE=$LIVE_RATE ./bench/kafka.sh\`;"
  echo "backlog: $N row changes from $TXNS transactions (written at $TPS TPS); load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  "$WORK/kafka-bench" table -in "$JSON"
} >"$OUT"
cp "$JSON" "${OUT%.md}.jsonl"
echo "== wrote $OUT"
cat "$OUT"
