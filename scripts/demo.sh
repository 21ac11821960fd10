#!/usr/bin/env bash
# make demo: the main job from nothing, on sandboxed MariaDB.
#   1. start a source and a target sandbox
#   2. sysbench oltp_insert prepare: 4 tables x 100,000 rows on the source
#   3. sluice migrate --mode full, then sluice verify, with the summary
#   4. sluice migrate --mode all into a second schema while sysbench writes to
#      the source, sluice status as it catches up, then stop and verify
#   5. the same table into Kafka: a Kafka sandbox (sluice sandbox kafka), a
#      task with a Kafka sink, --mode all (the snapshot as op "r" events,
#      then the changes) while sysbench writes, then a read_committed look
#      at the topic (DEMO_KAFKA=0 skips this part; it needs Java)
#   6. the live task again (it resumes from its checkpoint), sluice dtx serve
#      with two TCC transactions left prepared, and sluice console on both:
#      the demo ends by printing the console's URL, with all three running
# Ports and sizes can be changed with DEMO_SRC_PORT, DEMO_DST_PORT, DEMO_KAFKA_PORT,
# DEMO_TABLES, DEMO_ROWS.
set -euo pipefail
cd "$(dirname "$0")/.."

SLUICE=${SLUICE:-./bin/sluice}
# Under the user's own directory: the demo purges its sandboxes first, and a
# fixed /tmp path let two users on one machine wipe each other's demo.
export SLUICE_HOME=${SLUICE_HOME:-$HOME/.sluice/demo}
SRC_PORT=${DEMO_SRC_PORT:-3317}
DST_PORT=${DEMO_DST_PORT:-3318}
KAFKA_PORT=${DEMO_KAFKA_PORT:-9392}
DTX_PORT=${DEMO_DTX_PORT:-36790}
CONSOLE_PORT=${DEMO_CONSOLE_PORT:-8686}
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
applied_gtid() { # task file
  $SLUICE status --config "$1" --json 2>/dev/null |
    sed -n '/"applied"/,/}/p' | sed -n 's/.*"gtid_set": *"\([^"]*\)".*/\1/p'
}
# follow TASK_FILE LOG: show the task's status every 3 s while sysbench
# ($SYSBENCH) writes, then until the task has applied everything the source has.
follow() {
  while :; do
    sleep 3
    if ! kill -0 $SLUICE_PID 2>/dev/null; then
      echo "sluice stopped unexpectedly:"; cat "$2"; exit 2
    fi
    $SLUICE status --config "$1" 2>/dev/null | sed 's/^/  /' || echo "  (copy in progress)"
    echo
    if ! kill -0 $SYSBENCH 2>/dev/null && [ "$(applied_gtid "$1")" = "$(source_gtid)" ]; then
      break
    fi
  done
  wait $SYSBENCH || true
}
follow "$WORK/live.yaml" "$WORK/migrate-all.log"
grep -E "transactions:|queries:" "$WORK/sysbench.log" | sed 's/^ */sysbench: /'

step "caught up; stopping sluice (SIGINT) and verifying"
kill -INT $SLUICE_PID
wait $SLUICE_PID
trap - EXIT
sed -n '1,12p' "$WORK/migrate-all.log"
$SLUICE verify --config "$WORK/live.yaml"

if [ "${DEMO_KAFKA:-1}" != 0 ]; then
# Part 3: sbtest1 into Kafka, as Debezium-format change events, exactly once.
step "Kafka sandbox (one KRaft broker from Maven Central's jars) on 127.0.0.1:$KAFKA_PORT"
$SLUICE sandbox kafka down --name demo-kafka --purge >/dev/null 2>&1 || true
$SLUICE sandbox kafka up --name demo-kafka --port "$KAFKA_PORT"
cat > "$WORK/kafka.yaml" <<YAML
name: demo-kafka
source: {host: 127.0.0.1, port: $SRC_PORT, user: root, password: ""}
sink:
  kafka: {brokers: [127.0.0.1:$KAFKA_PORT], topic-prefix: demo}
tables: {include: ["sbtest.sbtest1"]}
dir: $WORK/kafka
YAML
step "task file $WORK/kafka.yaml"
cat "$WORK/kafka.yaml"
step "sluice migrate --mode all into Kafka while sysbench writes for ${DEMO_KAFKA_SECONDS:-10}s"
sysbench oltp_write_only --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$SRC_PORT" --mysql-user=root \
  --mysql-db=sbtest --tables=1 --table-size="$ROWS" --threads=2 --rate=100 \
  --time="${DEMO_KAFKA_SECONDS:-10}" run > "$WORK/sysbench-kafka.log" 2>&1 &
SYSBENCH=$!
$SLUICE migrate --config "$WORK/kafka.yaml" --mode all > "$WORK/migrate-kafka.log" 2>&1 &
SLUICE_PID=$!
trap 'kill $SYSBENCH $SLUICE_PID 2>/dev/null || true' EXIT
follow "$WORK/kafka.yaml" "$WORK/migrate-kafka.log"
grep -E "transactions:" "$WORK/sysbench-kafka.log" | sed 's/^ */sysbench: /'
kill -INT $SLUICE_PID
wait $SLUICE_PID
trap - EXIT
step "what a read_committed consumer of demo.sbtest.sbtest1 reads (the first two events, then the count)"
go run ./scripts/kafkapeek -brokers "127.0.0.1:$KAFKA_PORT" -topic demo.sbtest.sbtest1 -show 2
fi

if [ "${DEMO_KAFKA:-1}" != 0 ]; then
  step "done: a full copy and a live replication, both verified equal, and a table's snapshot and changes in Kafka"
else
  step "done: a full copy and a live replication, both verified equal"
fi

# Part 6: the console, on the live task (started again: it resumes from its
# checkpoint) and a coordinator with two transactions in it.
step "sluice console on the live task and a dtx coordinator"
$SLUICE migrate --config "$WORK/live.yaml" --mode all > "$WORK/migrate-all-2.log" 2>&1 &
TASK_PID=$!
$SLUICE dtx serve --store "bolt://$WORK/dtx.db" --listen "127.0.0.1:$DTX_PORT" > "$WORK/dtx.log" 2>&1 &
DTX_PID=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$DTX_PORT/api/dtmsvr/version" >/dev/null && break; sleep 0.1; done
for gid in demo-tcc-1 demo-tcc-2; do
  curl -sf -X POST "http://127.0.0.1:$DTX_PORT/api/dtmsvr/prepare" -H 'Content-Type: application/json' \
    -d "{\"gid\":\"$gid\",\"trans_type\":\"tcc\",\"timeout_to_fail\":86400}" >/dev/null
done
$SLUICE console --listen "127.0.0.1:$CONSOLE_PORT" --tasks "$WORK" --dtx "http://127.0.0.1:$DTX_PORT" > "$WORK/console.log" 2>&1 &
CONSOLE_PID=$!
for _ in $(seq 100); do grep -q 'sluice console on' "$WORK/console.log" 2>/dev/null && break; sleep 0.1; done
if ! kill -0 $CONSOLE_PID 2>/dev/null; then echo "the console did not start:"; cat "$WORK/console.log"; exit 2; fi
disown $TASK_PID $DTX_PID $CONSOLE_PID
echo "The task, the coordinator and the console run on (stop them: kill $TASK_PID $DTX_PID $CONSOLE_PID)."
echo "Sandboxes are still running: '$SLUICE sandbox list' (SLUICE_HOME=$SLUICE_HOME)."
echo "Stop them with: SLUICE_HOME=$SLUICE_HOME $SLUICE sandbox down --name demo-src --purge (and demo-dst;"
echo "the broker: $SLUICE sandbox kafka down --name demo-kafka --purge)"
step "console: http://127.0.0.1:$CONSOLE_PORT/"
