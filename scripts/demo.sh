#!/usr/bin/env bash
# make demo: the main job from nothing, on sandboxed MariaDB.
#   1. start a source and a target sandbox
#   2. sysbench oltp_insert prepare: 4 tables x 100,000 rows on the source
#   3. sluice migrate --mode full, then sluice verify
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

step "done: the target equals the source"
echo "Sandboxes are still running: '$SLUICE sandbox list' (SLUICE_HOME=$SLUICE_HOME)."
echo "Stop them with: SLUICE_HOME=$SLUICE_HOME $SLUICE sandbox down --name demo-src --purge (and demo-dst)"
