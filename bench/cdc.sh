#!/usr/bin/env bash
# CDC benchmark (issue 14, the PolarDB-X CDC seed's tables): what a CDC
# consumer gets from `sluice serve` against what it gets from MariaDB
# serving its own binlog, in the same run.
#
# The consumer is bench/cdc (go-mysql's BinlogSyncer, decoding every event,
# raw mode off). For each load, one consumer reads through sluice serve and
# one reads the source MariaDB directly, BOTH AT THE SAME TIME on the same
# load: alternating would give each its own load, and on a shared, noisy
# machine two loads differ more than the two readers do; reading at once
# they see the same transactions under the same machine state (they share
# the CPU with each other, equally). DT comes from a heartbeat table the
# consumer writes into every 10 ms during the load (see bench/cdc/main.go).
#
# Parts (PARTS, default "sysbench catchup global"; "large" is off by default):
#   sysbench: oltp_write_only and oltp_insert at each of THREADS against one
#     source for DURATION each; sluice serve is a pure binlog server of it.
#   catchup: after the sysbench rows, the binlog they wrote is read again
#     from its start by each reader alone, CATCHUP_ROUNDS times in
#     alternating order, as fast as the consumer takes it: the live rows
#     show whether a reader keeps up with the source, this shows how fast
#     each server serves (needs the sysbench part).
#   global: GLOBAL sources (each a sandbox with its own GTID domain) under
#     GLOBAL_WORKLOAD at GLOBAL_THREADS threads each, sluice serve with
#     sources: merging them; the merged stream is read beside each source
#     directly: merged TPS against the sum of the sources' TPS.
#   large: one transaction of each of LARGE GB (~1 MB-row INSERTs in one
#     BEGIN..COMMIT) per sluice serve run; DT is the XID's arrival minus
#     the moment COMMIT was sent.
#
# Env: DURATION (30s; seconds) THREADS ("1 4 16 64") WORKLOADS ("oltp_write_only oltp_insert")
#      TABLES (4) TABLE_SIZE (10000) PARTS ("sysbench catchup global") GLOBAL ("2 4")
#      GLOBAL_WORKLOAD (oltp_write_only) GLOBAL_THREADS (4) LARGE ("0.5 1 2")
#      BUFFER_POOL (512M per sandbox) SLUICE (bin/sluice) OUT (bench/out/cdc.md)
#      DRAIN (5m: how long a consumer may take to catch up after a load) CATCHUP_ROUNDS (2)
#      RELAY_SYNC (sluice's default, interval): the task's incremental.relay-sync
#      SLUICE_B (none): a second sluice binary, served beside the first in the
#        sysbench and large parts (its own relay and port; consumer "served_b"),
#        read at once with the others: a same-run A/B of two builds
#      RATES (none): after each sysbench row, one more row per fraction F given
#        here (e.g. "0.9"), the same load with sysbench --rate at F x the TPS
#        the unthrottled row just reached: the source at a rate it sustains
#        without its commit queue growing, beside its saturated maximum
set -euo pipefail

if [ -z "${SLUICE_BENCH_LOCKED:-}" ]; then
  export SLUICE_BENCH_LOCKED=1
  # -o: the servers the script starts must not inherit (and keep) the lock.
  exec flock -o /tmp/sluice-bench.lock "$0" "$@"
fi

cd "$(dirname "$0")/.."
DURATION=${DURATION:-30s}
THREADS=${THREADS:-1 4 16 64}
WORKLOADS=${WORKLOADS:-oltp_write_only oltp_insert}
TABLES=${TABLES:-4}
TABLE_SIZE=${TABLE_SIZE:-10000}
PARTS=${PARTS:-sysbench catchup global}
part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
GLOBAL=${GLOBAL:-2 4}
GLOBAL_WORKLOAD=${GLOBAL_WORKLOAD:-oltp_write_only}
GLOBAL_THREADS=${GLOBAL_THREADS:-4}
LARGE=${LARGE:-0.5 1 2}
BUFFER_POOL=${BUFFER_POOL:-512M}
SLUICE=${SLUICE:-$PWD/bin/sluice}
SLUICE_B=${SLUICE_B:-}
OUT=${OUT:-$PWD/bench/out/cdc.md}
DRAIN=${DRAIN:-5m}
CATCHUP_ROUNDS=${CATCHUP_ROUNDS:-2}
RELAY_SYNC=${RELAY_SYNC:-}
RATES=${RATES:-}
SYNC_YAML=""; [ -z "$RELAY_SYNC" ] || SYNC_YAML=", relay-sync: $RELAY_SYNC"
SECS=${DURATION%s}

for tool in sysbench mariadb go; do
  command -v "$tool" >/dev/null || { echo "cdc: $tool is missing (run 'make deps')" >&2; exit 2; }
done
[ -x "$SLUICE" ] || { echo "cdc: $SLUICE is missing (run 'make build')" >&2; exit 2; }
case "$SECS" in ''|*[!0-9]*) echo "cdc: DURATION=$DURATION: give whole seconds, e.g. 30s" >&2; exit 2 ;; esac

umask 077 # the task files name the service's password variable only, but keep the dir private anyway
WORK=$(mktemp -d /tmp/sluice-cdc.XXXXXX)
export SLUICE_HOME=$WORK/home
# The service's password reaches sluice and the consumer through the
# environment only (never argv or a file).
CDC_SERVE_PW=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
export CDC_SERVE_PW
SLUICE_PID=""
SANDBOXES=()
cleanup() {
  stop_sluice
  for n in "${SANDBOXES[@]}"; do "$SLUICE" sandbox down --name "$n" --purge >/dev/null 2>&1 || true; done
  rm -rf "$WORK"
}
stop_sluice() {
  if [ -n "${SLUICE_B_PID:-}" ]; then
    kill "$SLUICE_B_PID" 2>/dev/null || true
    wait "$SLUICE_B_PID" 2>/dev/null || true
    SLUICE_B_PID=""
  fi
  if [ -n "$SLUICE_PID" ]; then
    kill "$SLUICE_PID" 2>/dev/null || true
    wait "$SLUICE_PID" 2>/dev/null || true
    SLUICE_PID=""
  fi
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
sandbox_up() { # name port [domain-id]
  SANDBOXES+=("$1")
  "$SLUICE" sandbox up --name "$1" --port "$2" --buffer-pool "$BUFFER_POOL" ${3:+--domain-id "$3"} >/dev/null
}
prepare() { # port
  sql "$1" "CREATE DATABASE IF NOT EXISTS sbtest"
  sysbench oltp_write_only "${SB_COMMON[@]}" --mysql-port="$1" --threads="$TABLES" prepare >/dev/null
}
SB_COMMON=(--tables="$TABLES" --table-size="$TABLE_SIZE" --mysql-host=127.0.0.1 --mysql-user=root --mysql-db=sbtest --db-driver=mysql)
sb_run() { # workload port threads [rate]
  echo "sysbench $1 ${SB_COMMON[*]} --mysql-port=$2 --threads=$3 --time=$SECS ${4:+--rate=$4} run"
}
# start_sluice TASK-FILE [BINARY]: sluice serve in the background; waits until it serves.
start_sluice() {
  local log=$WORK/sluice-$(date +%s%N).log
  # Its own session, as the sandboxed servers (MariaDB, the peer) run and
  # as a service manager starts a service: Linux shares CPU time between
  # sessions (autogroups) before threads, and in this script's session
  # sluice shared one group's share with the consumer, while MariaDB's dump
  # thread had the source's. A same-run A/B (three runs, 2026-11-26) put
  # the served reader's p99 behind the first arrival at 75-152 ms in the
  # script's session and 44-57 ms in its own (MariaDB's dump 23-53 ms).
  # setsid execs in place here (the job is no group leader): $! is sluice.
  setsid "${2:-$SLUICE}" serve --config "$1" >"$log" 2>&1 &
  SLUICE_PID=$!
  for _ in $(seq 1 600); do
    grep -q "serving on" "$log" && return 0
    kill -0 "$SLUICE_PID" 2>/dev/null || { cat "$log" >&2; echo "cdc: sluice serve exited" >&2; exit 2; }
    sleep 0.1
  done
  cat "$log" >&2; echo "cdc: sluice serve did not start serving within 60 s" >&2; exit 2
}

COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown) # of the code this run builds
go build -o "$WORK/cdc-bench" ./bench/cdc
JSON=$WORK/cdc.jsonl
: >"$JSON"
mkdir -p "$(dirname "$OUT")"
CDC=("$WORK/cdc-bench" run -json "$JSON" -drain "$DRAIN")

if part sysbench || part large; then
  SRC_PORT=$(free_port); SERVE_PORT=$(free_port)
  echo "== source sandbox :$SRC_PORT (innodb_buffer_pool_size=$BUFFER_POOL), sluice serve :$SERVE_PORT"
  sandbox_up cdc_src "$SRC_PORT"
  prepare "$SRC_PORT"
  read -r F0 P0 _ < <(sql "$SRC_PORT" "SHOW MASTER STATUS")
  cat >"$WORK/serve.yaml" <<YAML
name: cdc
dir: $WORK/serve
source: {host: 127.0.0.1, port: $SRC_PORT, user: root, password: ""}
incremental: {binlog-file: $F0, binlog-pos: $P0$SYNC_YAML}
serve: {listen: "127.0.0.1:$SERVE_PORT", server-id: 4242, users: [{user: repl, password: "\${CDC_SERVE_PW}"}]}
YAML
  B_CONSUMER=()
  if [ -n "$SLUICE_B" ]; then
    SERVE_B_PORT=$(free_port)
    # Its own task name, so its own replica server id at the source: two
    # readers with one server id make the source drop the older one.
    sed -e "s#^name: cdc\$#name: cdcb#" -e "s#dir: $WORK/serve#dir: $WORK/serve-b#" -e "s#127.0.0.1:$SERVE_PORT#127.0.0.1:$SERVE_B_PORT#" "$WORK/serve.yaml" >"$WORK/serve-b.yaml"
    grep -q "^name: cdcb$" "$WORK/serve-b.yaml" || { echo "cdc: could not rename the second task" >&2; exit 2; }
    start_sluice "$WORK/serve-b.yaml" "$SLUICE_B"
    SLUICE_B_PID=$SLUICE_PID
    B_CONSUMER=(-consumer "served_b=repl:\${CDC_SERVE_PW}@127.0.0.1:$SERVE_B_PORT")
    echo "== also $SLUICE_B serving on :$SERVE_B_PORT (consumer served_b)"
  fi
  start_sluice "$WORK/serve.yaml"
  PAIR=(-consumer "served=repl:\${CDC_SERVE_PW}@127.0.0.1:$SERVE_PORT" -consumer "direct=root:@127.0.0.1:$SRC_PORT" "${B_CONSUMER[@]}"
    -heartbeat "root@tcp(127.0.0.1:$SRC_PORT)/" -pid "$SLUICE_PID")
  if part sysbench; then
    for w in $WORKLOADS; do
      for t in $THREADS; do
        echo "== $w, $t threads, ${SECS}s (sluice serve and MariaDB read at once)"
        "${CDC[@]}" "${PAIR[@]}" -part sysbench -workload "$w" -threads "$t" -load "$(sb_run "$w" "$SRC_PORT" "$t")"
        max_tps=$(tail -n 1 "$JSON" | grep -o '"source_tps":[0-9.]*' | cut -d: -f2)
        for f in $RATES; do
          rate=$(awk -v f="$f" -v m="$max_tps" 'BEGIN { printf "%d", f * m }')
          echo "== $w, $t threads at --rate=$rate ($f x the $max_tps TPS just reached), ${SECS}s"
          "${CDC[@]}" "${PAIR[@]}" -part sysbench -workload "$w" -threads "$t" -rate "$rate" -load "$(sb_run "$w" "$SRC_PORT" "$t" "$rate")"
        done
      done
    done
  fi
  if part sysbench && part catchup; then
    read -r F1 P1 _ < <(sql "$SRC_PORT" "SHOW MASTER STATUS")
    echo "== catch-up: $F0:$P0 to $F1:$P1, each reader alone, $CATCHUP_ROUNDS rounds"
    "$WORK/cdc-bench" catchup -json "$JSON" -rounds "$CATCHUP_ROUNDS" -from "$F0:$P0" -to "$F1:$P1" -pid "$SLUICE_PID" \
      -consumer "served=repl:\${CDC_SERVE_PW}@127.0.0.1:$SERVE_PORT" -consumer "direct=root:@127.0.0.1:$SRC_PORT"
  fi
  if part large; then
    for gb in $LARGE; do
      bytes=$(awk -v g="$gb" 'BEGIN { printf "%d", g * 1073741824 }')
      echo "== one transaction of $gb GB"
      "${CDC[@]}" "${PAIR[@]}" -part large -large "$bytes"
    done
  fi
  stop_sluice
fi

if part global; then
  maxn=0; for n in $GLOBAL; do [ "$n" -gt "$maxn" ] && maxn=$n; done
  GPORTS=()
  for i in $(seq 1 "$maxn"); do
    GPORTS+=("$(free_port)")
    echo "== shard sandbox g$i :${GPORTS[-1]} (gtid_domain_id $i)"
    sandbox_up "cdc_g$i" "${GPORTS[-1]}" "$i"
    prepare "${GPORTS[-1]}"
  done
  for n in $GLOBAL; do
    SERVE_PORT=$(free_port)
    {
      echo "name: cdcglobal$n"
      echo "dir: $WORK/global$n"
      echo "sources:"
      for i in $(seq 1 "$n"); do
        echo "  - {name: g$i, host: 127.0.0.1, port: ${GPORTS[$((i-1))]}, user: root, password: \"\", domain-id: $i}"
      done
      [ -z "$RELAY_SYNC" ] || echo "incremental: {relay-sync: $RELAY_SYNC}"
      echo "serve: {listen: \"127.0.0.1:$SERVE_PORT\", server-id: 4747, users: [{user: repl, password: \"\${CDC_SERVE_PW}\"}]}"
    } >"$WORK/global$n.yaml"
    start_sluice "$WORK/global$n.yaml"
    args=(-part global -workload "$GLOBAL_WORKLOAD" -threads "$GLOBAL_THREADS" -pid "$SLUICE_PID"
      -consumer "merged=repl:\${CDC_SERVE_PW}@127.0.0.1:$SERVE_PORT")
    for i in $(seq 1 "$n"); do
      p=${GPORTS[$((i-1))]}
      args+=(-consumer "g$i=root:@127.0.0.1:$p/1" -heartbeat "root@tcp(127.0.0.1:$p)/" -load "$(sb_run "$GLOBAL_WORKLOAD" "$p" "$GLOBAL_THREADS")")
    done
    echo "== global binlog of $n sources, $GLOBAL_WORKLOAD at $GLOBAL_THREADS threads each, ${SECS}s"
    "${CDC[@]}" "${args[@]}"
    stop_sluice
  done
fi

{
  echo "## make bench-cdc, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $COMMIT"
  echo
  echo "\`DURATION=$DURATION THREADS=\"$THREADS\" WORKLOADS=\"$WORKLOADS\" PARTS=\"$PARTS\" GLOBAL=\"$GLOBAL\" GLOBAL_THREADS=$GLOBAL_THREADS LARGE=\"$LARGE\" TABLES=$TABLES TABLE_SIZE=$TABLE_SIZE ./bench/cdc.sh\`; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  "$WORK/cdc-bench" table -in "$JSON"
} >"$OUT"
cp "$JSON" "${OUT%.md}.jsonl"
echo "== wrote $OUT"
cat "$OUT"
