#!/usr/bin/env bash
# make demo: the main job from nothing, on sandboxed MariaDB.
#   1. start a source and a target sandbox
#   2. sysbench oltp_insert prepare: 4 tables x 100,000 rows on the source
#   3. sluice migrate --mode full, then sluice verify, with the summary
#   4. sluice migrate --mode all into a second schema while sysbench writes to
#      the source, sluice status as it catches up, then stop and verify
# Ports and sizes can be changed with DEMO_SRC_PORT, DEMO_DST_PORT, DEMO_TABLES, DEMO_ROWS.
set -euo pipefail
cd "$(dirname "$0")/.."

SLUICE=${SLUICE:-./bin/sluice}
export SLUICE_HOME=${SLUICE_HOME:-/tmp/sluice-demo}
SRC_PORT=${DEMO_SRC_PORT:-3317}
DST_PORT=${DEMO_DST_PORT:-3318}
TABLES=${DEMO_TABLES:-4}
ROWS=${DEMO_ROWS:-100000}
WORK=$(mktemp -d /tmp/sluice-demo-task.XXXXXX)

step() { printf '\n== %s\n' "$*"; }

step "sandboxes in $SLUICE_HOME (fresh)"
$SLUICE sandbox down --name demo-src --purge >/dev/null 2>&1 || true
$SLUICE sandbox down --name demo-dst --purge >/dev/null 2>&1 || true
$SLUICE sandbox up --name demo-src --port "$SRC_PORT" --buffer-pool 1G
$SLUICE sandbox up --name demo-dst --port "$DST_PORT" --buffer-pool 1G

step "sysbench oltp_insert prepare: $TABLES tables x $ROWS rows on the source"
mariadb -h127.0.0.1 -P"$SRC_PORT" -uroot -e "CREATE DATABASE IF NOT EXISTS sbtest"
sysbench oltp_insert --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$SRC_PORT" --mysql-user=root \
  --mysql-db=sbtest --tables="$TABLES" --table-size="$ROWS" --threads=2 prepare >/dev/null

cat > "$WORK/task.yaml" <<YAML
name: demo
source: {host: 127.0.0.1, port: $SRC_PORT, user: root, password: ""}
target: {host: 127.0.0.1, port: $DST_PORT, user: root, password: ""}
tables: {include: ["sbtest.*"]}
threads: 4
pool-size: 8
rows-per-chunk: 50000
YAML
step "task file $WORK/task.yaml"
cat "$WORK/task.yaml"

step "sluice migrate --mode full"
$SLUICE migrate --config "$WORK/task.yaml" --mode full

step "sluice verify"
$SLUICE verify --config "$WORK/task.yaml"

step "full migration done: the target equals the source"

# Part 2: the same tables, copied again into sbtest_live on the target, this
# time with --mode all while sysbench writes to the source: the full copy,
# then replication from the snapshot's exact position, until we stop it.
cat > "$WORK/live.yaml" <<YAML
name: demo-live
source: {host: 127.0.0.1, port: $SRC_PORT, user: root, password: ""}
target: {host: 127.0.0.1, port: $DST_PORT, user: root, password: ""}
tables: {include: ["sbtest.*"]}
routes: [{schema: sbtest, target-schema: sbtest_live}]
threads: 4
pool-size: 8
dir: $WORK/live
incremental: {worker-count: 16, batch: 100}
YAML
step "sysbench oltp_write_only on the source for ${DEMO_WRITE_SECONDS:-20}s, while sluice migrate --mode all runs"
sysbench oltp_write_only --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$SRC_PORT" --mysql-user=root \
  --mysql-db=sbtest --tables="$TABLES" --table-size="$ROWS" --threads=4 --rate=300 \
  --time="${DEMO_WRITE_SECONDS:-20}" run > "$WORK/sysbench.log" 2>&1 &
SYSBENCH=$!
$SLUICE migrate --config "$WORK/live.yaml" --mode all > "$WORK/migrate-all.log" 2>&1 &
SLUICE_PID=$!
trap 'kill $SYSBENCH $SLUICE_PID 2>/dev/null || true' EXIT

source_gtid() { mariadb -h127.0.0.1 -P"$SRC_PORT" -uroot -N -e "SELECT @@gtid_binlog_pos"; }
applied_gtid() {
  $SLUICE status --config "$WORK/live.yaml" --json 2>/dev/null |
    sed -n '/"applied"/,/}/p' | sed -n 's/.*"gtid_set": *"\([^"]*\)".*/\1/p'
}
# Show the status every 3 s while sysbench writes, then until the target has
# applied everything the source has.
while :; do
  sleep 3
  if ! kill -0 $SLUICE_PID 2>/dev/null; then
    echo "sluice stopped unexpectedly:"; cat "$WORK/migrate-all.log"; exit 2
  fi
  $SLUICE status --config "$WORK/live.yaml" 2>/dev/null | sed 's/^/  /' || echo "  (full copy in progress)"
  echo
  if ! kill -0 $SYSBENCH 2>/dev/null && [ "$(applied_gtid)" = "$(source_gtid)" ]; then
    break
  fi
done
wait $SYSBENCH || true
grep -E "transactions:|queries:" "$WORK/sysbench.log" | sed 's/^ */sysbench: /'

step "caught up; stopping sluice (SIGINT) and verifying"
kill -INT $SLUICE_PID
wait $SLUICE_PID
trap - EXIT
sed -n '1,12p' "$WORK/migrate-all.log"
$SLUICE verify --config "$WORK/live.yaml"

step "done: a full copy and a live replication, both verified equal"
echo "Sandboxes are still running: '$SLUICE sandbox list' (SLUICE_HOME=$SLUICE_HOME)."
echo "Stop them with: SLUICE_HOME=$SLUICE_HOME $SLUICE sandbox down --name demo-src --purge (and demo-dst)"
