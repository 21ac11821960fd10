#!/usr/bin/env bash
# The DM seed on its own system: sluice beside TiDB DM, moving a MariaDB
# source into the same TiDB (one tidb-server in unistore mode), in the same
# run. For each tool and round:
#   1. full import: sysbench's TABLES x TABLE_SIZE rows, from the moment the
#      tool starts until the target holds exactly the source's rows (the
#      same CRC32 per table on both sides: a check that shares no code with
#      either tool), reported as time and MB/s of the source's data;
#   2. incremental: sysbench WORKLOAD for INC_TIME on the source while the
#      tool replicates; the applied rate is the source's transactions over
#      the time until the target equals the source again, and the catch-up
#      is the time after the workload stopped.
# Tools take turns in rotated order (sluice first in odd rounds), ROUNDS
# rounds; the medians and the ratio sluice / DM are printed at the end and,
# with RECORD=1, written to docs/benchmarks/dm.md.
#
# Env: TABLES (4) TABLE_SIZE (100000) ROUNDS (3) INC_TIME (60) THREADS (16)
#      WORKLOADS ("oltp_insert oltp_write_only") DM_WORKERS (16) DM_BATCH (100)
#      SLUICE (bin/sluice) RECORD (0) TOOLS ("sluice dm")
# DM and tidb-server are built once into ~/.cache (bench/dm/build.sh and
# `sluice sandbox tidb up`): about 12 and 11 minutes the first time.
set -euo pipefail

if [ -z "${SLUICE_BENCH_LOCKED:-}" ]; then
  export SLUICE_BENCH_LOCKED=1
  exec flock -o /tmp/sluice-bench.lock "$0" "$@"
fi

cd "$(dirname "$0")/.."
TABLES=${TABLES:-4}
TABLE_SIZE=${TABLE_SIZE:-100000}
ROUNDS=${ROUNDS:-3}
INC_TIME=${INC_TIME:-60}
THREADS=${THREADS:-16}
WORKLOADS=${WORKLOADS:-"oltp_insert oltp_write_only"}
DM_WORKERS=${DM_WORKERS:-16}
DM_BATCH=${DM_BATCH:-100}
TOOLS=${TOOLS:-"sluice dm"}
SLUICE=${SLUICE:-$PWD/bin/sluice}
RECORD=${RECORD:-0}
DOC=${DOC:-$PWD/docs/benchmarks/dm.md}

for tool in sysbench mariadb; do
  command -v "$tool" >/dev/null || { echo "dm bench: $tool is missing (run 'make deps')" >&2; exit 2; }
done
[ -x "$SLUICE" ] || { echo "dm bench: $SLUICE is missing (run 'make build')" >&2; exit 2; }
DM_DIR=$(bench/dm/build.sh)

WORK=$(mktemp -d /tmp/sluice-benchdm.XXXXXX)
export SLUICE_HOME=$WORK/home
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$SLUICE" sandbox down --name dm_src --purge >/dev/null 2>&1 || true
  "$SLUICE" sandbox tidb down --name dm_tidb --purge >/dev/null 2>&1 || true
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
SRC_PORT=$(free_port); TIDB_PORT=$(free_port); TIDB_STATUS=$(free_port)
MASTER_PORT=$(free_port); PEER_PORT=$(free_port); WORKER_PORT=$(free_port)

echo "== source MariaDB :$SRC_PORT, TiDB :$TIDB_PORT (unistore), DM master :$MASTER_PORT worker :$WORKER_PORT"
"$SLUICE" sandbox up --name dm_src --port "$SRC_PORT" >/dev/null
"$SLUICE" sandbox tidb up --name dm_tidb --port "$TIDB_PORT" --status-port "$TIDB_STATUS" >/dev/null
SRC=(mariadb -h127.0.0.1 -P"$SRC_PORT" -uroot -N -B)
DST=(mariadb -h127.0.0.1 -P"$TIDB_PORT" -uroot -N -B)

# DM: one master, one worker, the source registered once.
"$DM_DIR/dm-master" --name=m1 --master-addr=127.0.0.1:"$MASTER_PORT" --advertise-addr=127.0.0.1:"$MASTER_PORT" \
  --peer-urls=http://127.0.0.1:"$PEER_PORT" --advertise-peer-urls=http://127.0.0.1:"$PEER_PORT" \
  --initial-cluster=m1=http://127.0.0.1:"$PEER_PORT" --data-dir="$WORK/dm-master" --log-file="$WORK/dm-master.log" >/dev/null 2>&1 &
PIDS+=($!)
"$DM_DIR/dm-worker" --name=w1 --worker-addr=127.0.0.1:"$WORKER_PORT" --advertise-addr=127.0.0.1:"$WORKER_PORT" \
  --join=127.0.0.1:"$MASTER_PORT" --log-file="$WORK/dm-worker.log" >/dev/null 2>&1 &
PIDS+=($!)
dmctl() { "$DM_DIR/dm-ctl" --master-addr=127.0.0.1:"$MASTER_PORT" "$@"; }
cat >"$WORK/source.yaml" <<EOF
source-id: src1
flavor: mariadb
enable-gtid: false
enable-relay: false
from: {host: 127.0.0.1, port: $SRC_PORT, user: root, password: ""}
EOF
for i in $(seq 1 60); do
  dmctl operate-source create "$WORK/source.yaml" >"$WORK/source.out" 2>&1 && grep -q '"result": true' "$WORK/source.out" && break
  sleep 1
done
grep -q '"result": true' "$WORK/source.out" || { echo "dm bench: DM did not take the source:" >&2; cat "$WORK/source.out" >&2; exit 1; }

# checksum prints one line per table: name, rows, CRC32 of every row.
checksum() {
  local q="" t
  for t in $(seq 1 "$TABLES"); do
    q+="SELECT 'sbtest$t', COUNT(*), IFNULL(BIT_XOR(CRC32(CONCAT_WS('#', id, k, c, pad))), 0) FROM sbtest.sbtest$t;"
  done
  "$@" -e "$q" 2>/dev/null
}
# wait_equal waits until the target holds the source's rows; prints the
# seconds it waited.
wait_equal() {
  local start want got
  start=$(date +%s.%N)
  want=$(checksum "${SRC[@]}")
  while :; do
    got=$(checksum "${DST[@]}" || true)
    [ "$got" = "$want" ] && break
    sleep 0.5
  done
  echo "$(date +%s.%N) - $start" | bc
}

prepare_source() {
  "${SRC[@]}" -e "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
  sysbench oltp_insert --tables="$TABLES" --table-size="$TABLE_SIZE" --threads="$TABLES" \
    --mysql-host=127.0.0.1 --mysql-port="$SRC_PORT" --mysql-user=root --mysql-db=sbtest --db-driver=mysql prepare >/dev/null
  "${DST[@]}" -e "DROP DATABASE IF EXISTS sbtest; DROP DATABASE IF EXISTS dm_meta; DROP DATABASE IF EXISTS sluice_meta"
  "${SRC[@]}" -e "SELECT ROUND(SUM(DATA_LENGTH + INDEX_LENGTH) / 1048576, 1) FROM information_schema.TABLES WHERE TABLE_SCHEMA='sbtest'"
}

start_tool() { # tool run-id
  case $1 in
  sluice)
    cat >"$WORK/task-$2.yaml" <<EOF
name: dm$2
source: {host: 127.0.0.1, port: $SRC_PORT, user: root, password: ""}
target: {host: 127.0.0.1, port: $TIDB_PORT, user: root, password: ""}
tables: {include: ["sbtest.*"]}
threads: 4
pool-size: 16
dir: $WORK/sluice-$2
incremental: {worker-count: $DM_WORKERS}
EOF
    "$SLUICE" migrate --config "$WORK/task-$2.yaml" --mode all >"$WORK/sluice-$2.log" 2>&1 &
    TOOL_PID=$!
    ;;
  dm)
    cat >"$WORK/task-$2.yaml" <<EOF
name: dm$2
task-mode: all
meta-schema: dm_meta
ignore-checking-items: ["all"]
target-database: {host: 127.0.0.1, port: $TIDB_PORT, user: root, password: ""}
mysql-instances:
  - source-id: src1
    block-allow-list: bal
    mydumper-config-name: d
    loader-config-name: l
    syncer-config-name: s
block-allow-list:
  bal: {do-dbs: ["sbtest"]}
mydumpers:
  d: {threads: 4}
loaders:
  l: {pool-size: 16, dir: "$WORK/dm-dump-$2", import-mode: logical}
syncers:
  s: {worker-count: $DM_WORKERS, batch: $DM_BATCH}
EOF
    dmctl start-task "$WORK/task-$2.yaml" >"$WORK/dm-start-$2.out" 2>&1 || true
    grep -q '"result": true' "$WORK/dm-start-$2.out" || { echo "dm bench: start-task failed:" >&2; cat "$WORK/dm-start-$2.out" >&2; exit 1; }
    TOOL_PID=
    ;;
  esac
}
stop_tool() { # tool run-id
  case $1 in
  sluice) kill "$TOOL_PID" 2>/dev/null || true; wait "$TOOL_PID" 2>/dev/null || true ;;
  dm) dmctl stop-task "dm$2" >/dev/null 2>&1 || true ;;
  esac
}

RESULTS=$WORK/results.tsv
: >"$RESULTS"
run=0
for round in $(seq 1 "$ROUNDS"); do
  order=$TOOLS
  [ $((round % 2)) = 0 ] && order=$(echo "$TOOLS" | tr ' ' '\n' | tac | tr '\n' ' ')
  for tool in $order; do
    for wl in $WORKLOADS; do
      run=$((run + 1))
      mb=$(prepare_source)
      t0=$(date +%s.%N)
      start_tool "$tool" "$run"
      wait_equal >/dev/null
      full=$(echo "$(date +%s.%N) - $t0" | bc)
      out=$(sysbench "$wl" --tables="$TABLES" --table-size="$TABLE_SIZE" --threads="$THREADS" --time="$INC_TIME" \
        --mysql-host=127.0.0.1 --mysql-port="$SRC_PORT" --mysql-user=root --mysql-db=sbtest --db-driver=mysql \
        --db-ps-mode=disable --report-interval=0 run)
      txns=$(echo "$out" | sed -n 's/^ *transactions: *\([0-9]*\) .*/\1/p')
      catchup=$(wait_equal)
      stop_tool "$tool" "$run"
      applied=$(echo "scale=1; $txns / ($INC_TIME + $catchup)" | bc)
      srctps=$(echo "scale=1; $txns / $INC_TIME" | bc)
      mbs=$(echo "scale=2; $mb / $full" | bc)
      printf '%s\t%s\t%s\t%s\t%.1f\t%s\t%s\t%s\t%.1f\n' "$round" "$tool" "$wl" "$mb" "$full" "$mbs" "$srctps" "$applied" "$catchup" | tee -a "$RESULTS"
    done
  done
done

echo
echo "| tool | workload | full import (s) | full import (MB/s) | source TPS | applied TPS | catch-up (s) |"
echo "| :-- | :-- | --: | --: | --: | --: | --: |"
median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
declare -A MED
for tool in $TOOLS; do
  for wl in $WORKLOADS; do
    rows=$(awk -F'\t' -v t="$tool" -v w="$wl" '$2==t && $3==w' "$RESULTS")
    f=$(echo "$rows" | cut -f5 | median); m=$(echo "$rows" | cut -f6 | median)
    s=$(echo "$rows" | cut -f7 | median); a=$(echo "$rows" | cut -f8 | median); c=$(echo "$rows" | cut -f9 | median)
    MED[$tool,$wl]="$m $a"
    echo "| $tool | $wl | $f | $m | $s | $a | $c |"
  done
done
if [[ " $TOOLS " == *" sluice "* && " $TOOLS " == *" dm "* ]]; then
  echo
  for wl in $WORKLOADS; do
    read -r sm sa <<<"${MED[sluice,$wl]}"; read -r dm da <<<"${MED[dm,$wl]}"
    echo "ratio sluice / DM ($wl, medians of $ROUNDS): full import $(echo "scale=2; $sm / $dm" | bc)x, applied TPS $(echo "scale=2; $sa / $da" | bc)x (goal: at least 2x on both)"
  done
fi
if [ "$RECORD" = 1 ]; then
  {
    echo "# sluice beside DM into TiDB ($(date -u +%F), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg) at the end)"
    echo
    echo "Command: \`TABLES=$TABLES TABLE_SIZE=$TABLE_SIZE ROUNDS=$ROUNDS INC_TIME=$INC_TIME make bench-dm\`"
    echo
    echo "Every run, in order (round, tool, workload, MB, full import s, MB/s, source TPS, applied TPS, catch-up s):"
    echo
    echo '```'
    cat "$RESULTS"
    echo '```'
  } >"$DOC"
  echo "recorded in $DOC"
fi
