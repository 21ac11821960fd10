#!/usr/bin/env bash
# Replication benchmark (issue 3): how fast a backlog of sysbench transactions
# is caught up by sluice (binlog reader -> relay log -> writeset-parallel
# apply), by a MariaDB native replica with slave_parallel_threads=8
# (optimistic) and by a single-threaded native replica. Every contender
# replays the same backlog from the same source, one at a time, fetching
# from the source while it applies. This is repeated ROUNDS times, with a
# fresh backlog each round and the contenders' order rotated, so whatever
# the servers do right after a backlog is written (purge, page flushing)
# does not always fall on the same contender; the tables report medians.
# Then: sluice at 0 ms and with LATENCY ms added to every round trip to the
# target (an in-process toxiproxy), in source commit order and with
# commit-order: relaxed, again in rotated rounds with a backlog each; and a
# sweep of sluice's worker count, like the DM report's table, with where each
# pipeline stage's time went in every run (sluice_replication_stage_seconds_total).
#
# Prints events/s, txn/s, sluice's CPU and peak RSS, and the ratios; writes
# the tables to $OUT.
#
# Env: BACKLOG (100000 transactions) SWEEP_BACKLOG (20000) TABLES (4)
#      TABLE_SIZE (100000) SB_THREADS (8) WORKERS (16) BATCH (100)
#      ROUNDS (3) PARTS ("catchup latency sweep large") LATENCY (20) SWEEP ("4 8 16 32 64") BUFFER_POOL (1G)
#      SLUICE (bin/sluice) OUT (bench/out/replication.md)
#      CATCHUP ("oltp_write_only oltp_insert"): the catch-up workloads; fk_pairs is
#        bench/sysbench/fk_pairs.lua, parent/child pairs with cascading foreign keys
#      NATIVES ("n8 n1"): the native replicas in the catch-up rounds (n8 is needed for the ratio)
#      LARGE_ROWS (500000): the large-transaction rows (PARTS large, bench/replication_large.sh):
#        an INSERT ... SELECT of twice as many rows, then an UPDATE and a DELETE of LARGE_ROWS each
#      SLUICE_B: a second sluice binary (e.g. the build before a change) for a same-run A/B: it
#        joins the rotation of the catch-up rounds with its own target, task dir and relay,
#        and of the latency rounds at 0 ms and at +LATENCY ms (through a proxy of its own)
#      LABEL_B ("B"): how its rows are named
#      KEEP_DIR: keep every sluice run's metrics and status there (HHMMSS-a|b-task-TARGETPORT.*)
#      PROFILE_DIR: write a CPU profile of every sluice run there (SLUICE_CPUPROFILE), named
#        WORKLOAD-rROUND-a|b-PID.prof (a: SLUICE, b: SLUICE_B), and its allocation profile
#        (SLUICE_MEMPROFILE) beside it as .alloc
set -euo pipefail

if [ -z "${SLUICE_BENCH_LOCKED:-}" ]; then
  export SLUICE_BENCH_LOCKED=1
  # -o: the servers the script starts must not inherit (and keep) the lock.
  exec flock -o /tmp/sluice-bench.lock "$0" "$@"
fi

cd "$(dirname "$0")/.."
BACKLOG=${BACKLOG:-100000}
SWEEP_BACKLOG=${SWEEP_BACKLOG:-20000}
TABLES=${TABLES:-4}
TABLE_SIZE=${TABLE_SIZE:-100000}
SB_THREADS=${SB_THREADS:-8}
WORKERS=${WORKERS:-16}
BATCH=${BATCH:-100}
ROUNDS=${ROUNDS:-3}
PARTS=${PARTS:-catchup latency sweep large}
part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
LATENCY=${LATENCY:-20}
SWEEP=${SWEEP:-4 8 16 32 64}
BUFFER_POOL=${BUFFER_POOL:-1G}
SLUICE=${SLUICE:-$PWD/bin/sluice}
OUT=${OUT:-$PWD/bench/out/replication.md}
CATCHUP=${CATCHUP:-oltp_write_only oltp_insert}
SB_FK=$PWD/bench/sysbench/fk_pairs.lua
NATIVES=${NATIVES:-n8 n1}
SLUICE_B=${SLUICE_B:-}
LABEL_B=${LABEL_B:-B}
PROFILE_DIR=${PROFILE_DIR:-}
KEEP_DIR=${KEEP_DIR:-}
PROFILE_LABEL=run

for tool in sysbench mariadb go; do
  command -v "$tool" >/dev/null || { echo "replication: $tool is missing (run 'make deps')" >&2; exit 2; }
done
[ -x "$SLUICE" ] || { echo "replication: $SLUICE is missing (run 'make build')" >&2; exit 2; }
[ -z "$SLUICE_B" ] || [ -x "$SLUICE_B" ] || { echo "replication: SLUICE_B=$SLUICE_B is missing" >&2; exit 2; }
[ -z "$PROFILE_DIR" ] || mkdir -p "$PROFILE_DIR"
[ -z "$KEEP_DIR" ] || mkdir -p "$KEEP_DIR"

WORK=$(mktemp -d /tmp/sluice-repl.XXXXXX)
export SLUICE_HOME=$WORK/home
PROXY_PID=""
PROXYB_PID=""
SLUICE_PID=""
cleanup() {
  [ -n "$SLUICE_PID" ] && kill "$SLUICE_PID" 2>/dev/null && wait "$SLUICE_PID" 2>/dev/null || true
  [ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null || true
  [ -n "$PROXYB_PID" ] && kill "$PROXYB_PID" 2>/dev/null || true
  for n in rb_src rb_dst rb_dstb rb_rep8 rb_rep1; do "$SLUICE" sandbox down --name $n --purge >/dev/null 2>&1 || true; done
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
SRC_PORT=$(free_port); DST_PORT=$(free_port); REP8_PORT=$(free_port); REP1_PORT=$(free_port); DSTB_PORT=$(free_port)
go build -o "$WORK/latencyproxy" ./bench/latencyproxy

echo "== sandboxes (innodb_buffer_pool_size=$BUFFER_POOL each): source :$SRC_PORT, sluice target :$DST_PORT, native replicas :$REP8_PORT (8 threads), :$REP1_PORT (1 thread)"
SANDBOXES=("rb_src $SRC_PORT" "rb_dst $DST_PORT" "rb_rep8 $REP8_PORT" "rb_rep1 $REP1_PORT")
[ -z "$SLUICE_B" ] || SANDBOXES+=("rb_dstb $DSTB_PORT")
for s in "${SANDBOXES[@]}"; do
  set -- $s
  "$SLUICE" sandbox up --name "$1" --port "$2" --buffer-pool "$BUFFER_POOL" >/dev/null
done
sql() { local port=$1; shift; mariadb -h127.0.0.1 -P"$port" -uroot -N -s -e "$*"; }

read -r F0 P0 _ < <(sql "$SRC_PORT" "SHOW MASTER STATUS")
sql "$SRC_PORT" "CREATE DATABASE sbtest"
echo "== sysbench prepare: $TABLES tables x $TABLE_SIZE rows (replicated to every contender from $F0:$P0)"
SB=(--tables="$TABLES" --table-size="$TABLE_SIZE" --mysql-host=127.0.0.1 --mysql-port="$SRC_PORT" --mysql-user=root --mysql-db=sbtest --db-driver=mysql --db-ps-mode=disable)
sysbench oltp_write_only "${SB[@]}" --threads="$TABLES" prepare >/dev/null
# fk_pairs: parent/child table pairs with ON DELETE/UPDATE CASCADE (sysbench's
# tables have no foreign keys), for catch-up with the applier's FK checks on.
case " $CATCHUP " in *" fk_pairs "*) sysbench "$SB_FK" "${SB[@]}" prepare >/dev/null ;; esac

for port in $REP8_PORT $REP1_PORT; do
  threads=8; [ "$port" = "$REP1_PORT" ] && threads=0
  sql "$port" "SET GLOBAL slave_parallel_threads=$threads; SET GLOBAL slave_parallel_mode='optimistic';
    CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$SRC_PORT, MASTER_USER='repl', MASTER_PASSWORD='repl',
    MASTER_LOG_FILE='$F0', MASTER_LOG_POS=$P0, MASTER_USE_GTID=no"
done

write_task() { # file name dir workers target-port [commit-order]
  local file=$1 name=$2 dir=$3; shift 3
  cat >"$file" <<YAML
name: $name
source: {host: 127.0.0.1, port: $SRC_PORT, user: root, password: ""}
target: {host: 127.0.0.1, port: $2, user: root, password: ""}
tables: {include: ["sbtest.*"]}
dir: $dir
incremental:
  binlog-file: $F0
  binlog-pos: $P0
  worker-count: $1
  batch: $BATCH
  commit-order: ${3:-source}
  relay-sync: interval
  metrics-addr: "127.0.0.1:0"
YAML
}
src_gtid() { sql "$SRC_PORT" "SELECT @@gtid_binlog_pos"; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
# host_ticks: the host's busy and total CPU ticks (/proc/stat); pid_ticks PID: a process's.
host_ticks() { awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat; }
pid_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
field() { awk -F': ' -v k="\"$1\":" '$0 ~ k { gsub(",", "", $2); print $2; exit }' "$WORK/status.json"; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.0f", n / s }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f %%", 100 * a / b }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# stage_secs STAGE STATE: seconds from the last run's metrics scrape ("-" if not exported).
stage_secs() {
  awk -v k="sluice_replication_stage_seconds_total{stage=\"$1\",state=\"$2\"," \
    'index($0, k) == 1 { printf "%.2f", $NF; f = 1 } END { if (!f) printf "-" }' "$WORK/metrics.txt"
}
STATES="work wait_input wait_output flush wait_conflict execute execute_commit wait_turn commit"
# stage_rows W TIME: the breakdown's rows of a run with W workers that took TIME seconds.
stage_rows() {
  local st state row
  for st in fetch relay_write decode schedule worker; do
    row="| $1 | $2 | $st$( [ "$st" = worker ] && echo " (x $1)") |"
    for state in $STATES; do row="$row $(stage_secs "$st" "$state") |"; done
    echo "$row"
  done
}
rates() { local n=$1 out="" t; shift; for t in "$@"; do out="$out${out:+, }$(rate "$n" "$t")"; done; echo "$out"; }

# native CATCHUP: START SLAVE, wait until the replica has applied the
# source's GTID position, STOP SLAVE; prints seconds.
native() {
  local port=$1 want t0
  want=$(src_gtid)
  t0=$(now)
  sql "$port" "START SLAVE"
  until [ "$(sql "$port" "SELECT @@gtid_slave_pos")" = "$want" ]; do
    if mariadb -h127.0.0.1 -P"$port" -uroot -e "SHOW SLAVE STATUS\G" | grep -q "Last_SQL_Errno: [1-9]"; then
      echo "replication: native replica :$port stopped with an error" >&2; exit 2
    fi
    sleep 0.1
  done
  secs "$t0" "$(now)"
  sql "$port" "STOP SLAVE"
}

# sluice WORKERS TARGET_PORT [COMMIT_ORDER]: run the task until it has applied the source's
# GTID position; prints "seconds events cpu_seconds peak_rss_mb".
sluice_run() { sluice_run_as a "$@"; }
# sluice_run_as a|b ...: the same with SLUICE (a) or SLUICE_B (b), each with its own target,
# task and relay.
sluice_run_as() {
  local id=$1 bin=$SLUICE name=replbench dir=$WORK/task task=$WORK/task.yaml dst=$DST_PORT
  shift
  if [ "$id" = b ]; then bin=$SLUICE_B; name=replbenchb; dir=$WORK/taskb; task=$WORK/taskb.yaml; dst=$DSTB_PORT; fi
  local want t0 t1 ticks events cpu rss prof=""
  [ -z "$PROFILE_DIR" ] || prof="$PROFILE_DIR/$PROFILE_LABEL-$id-%p.prof"
  write_task "$task" "$name" "$dir" "$1" "$2" "${3:-source}"
  want=$(src_gtid)
  local tpid h0 h1 g0 g1
  tpid=$(cat "$(sql "$dst" "SELECT @@pid_file")")
  h0=$(host_ticks); g0=$(pid_ticks "$tpid")
  t0=$(now)
  env ${prof:+SLUICE_CPUPROFILE=$prof SLUICE_MEMPROFILE=${prof%.prof}.alloc} "$bin" migrate --config "$task" --mode incremental >>"$WORK/sluice.log" 2>&1 &
  SLUICE_PID=$!
  until [ "$(sql "$dst" "SELECT gtid_set FROM sluice_meta.apply_checkpoint WHERE task='$name' ORDER BY seq DESC LIMIT 1" 2>/dev/null)" = "$want" ]; do
    kill -0 "$SLUICE_PID" 2>/dev/null || { echo "replication: sluice exited; see the log:" >&2; tail -5 "$WORK/sluice.log" >&2; exit 2; }
    sleep 0.1
  done
  t1=$(now)
  h1=$(host_ticks); g1=$(pid_ticks "$tpid")
  # Where the pipeline's time went, read live now that the target has caught up (the sweep's
  # breakdown): sluice_replication_stage_seconds_total from the task's metrics endpoint.
  local maddr
  maddr=$(awk -F'"' '/"metrics_addr"/ { print $4; exit }' "$dir/status.json" 2>/dev/null || true)
  : >"$WORK/metrics.txt"
  [ -z "$maddr" ] || curl -sf "http://$maddr/metrics" >"$WORK/metrics.txt" || true
  ticks=$(awk '{print $14 + $15}' "/proc/$SLUICE_PID/stat")
  rss=$(awk '/VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$SLUICE_PID/status")
  sleep 1.2 # one more status refresh for the event count
  "$bin" status --config "$task" --json >"$WORK/status.json"
  if [ -n "$KEEP_DIR" ]; then
    # Each run's metrics and status, for reading where its time went afterwards.
    local keep
    keep=$KEEP_DIR/$(date -u +%H%M%S)-$id-$(basename "$task" .yaml)-$2
    cp "$WORK/metrics.txt" "$keep.metrics"; cp "$WORK/status.json" "$keep.status.json"
  fi
  events=$(field events)
  # What bounds the run, for the sweep: how busy the host's CPUs were, the
  # target server's CPU seconds, and how the applier grouped and scheduled.
  echo "$(awk -v a="$h0" -v b="$h1" 'BEGIN { split(a, x); split(b, y); printf "%.0f", 100 * (y[1] - x[1]) / (y[2] - x[2]) }') \
$(awk -v a="$g0" -v b="$g1" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", (b - a) / hz }') \
$(field commits) $(field conflicts) $(field max_in_flight) $(field chained)" >"$WORK/extra"
  kill -TERM "$SLUICE_PID"; wait "$SLUICE_PID" || true; SLUICE_PID=""
  cpu=$(awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", t / hz }')
  echo "$(secs "$t0" "$t1") $events $cpu $rss"
}

backlog() { # test transactions
  echo "== backlog: sysbench $1, $2 transactions, $SB_THREADS threads (replicas and sluice stopped)" >&2
  local t=$1
  [ "$t" != fk_pairs ] || t=$SB_FK
  sysbench "$t" "${SB[@]}" --threads="$SB_THREADS" --events="$2" --time=0 --rate=0 run >/dev/null
}

echo "== initial catch-up (the prepared tables)"
native "$REP8_PORT" >/dev/null
case " $NATIVES " in *" n1 "*) native "$REP1_PORT" >/dev/null ;; esac
sluice_run "$WORKERS" "$DST_PORT" >/dev/null
[ -z "$SLUICE_B" ] || sluice_run_as b "$WORKERS" "$DSTB_PORT" >/dev/null

mkdir -p "$(dirname "$OUT")"
{
echo "Run $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; MariaDB $(sql "$SRC_PORT" "SELECT VERSION()"); $TABLES tables x $TABLE_SIZE rows; backlog written by $SB_THREADS sysbench threads; sluice $WORKERS workers, batch $BATCH, relay-sync interval; $ROUNDS rounds, medians."
[ -z "$SLUICE_B" ] || echo "A/B in the same rounds: sluice is $SLUICE, sluice $LABEL_B is $SLUICE_B (its own target server, task dir and relay); the contenders' order rotates each round."
echo
echo "| workload | contender | txns | events | median time (s) | median txn/s | median events/s | txn/s per round | sluice CPU (s) | sluice peak RSS (MB) | sluice / native 8 threads (medians) |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |"
} >"$OUT"

# run_contender NAME: one catch-up, appends its time to that contender's list.
declare -A TIMES
run_contender() {
  case $1 in
    n8) TIMES[n8]+=" $(native "$REP8_PORT")" ;;
    n1) TIMES[n1]+=" $(native "$REP1_PORT")" ;;
    sluice)
      read -r ts ev cpu rss < <(sluice_run "$WORKERS" "$DST_PORT")
      TIMES[sluice]+=" $ts"; EV=$ev; CPUS+=" $cpu"; RSSS+=" $rss" ;;
    sluiceb)
      read -r ts ev cpu rss < <(sluice_run_as b "$WORKERS" "$DSTB_PORT")
      TIMES[sluiceb]+=" $ts"; CPUSB+=" $cpu"; RSSSB+=" $rss" ;;
  esac
}

declare -A SLUICE0
SLUICE0[oltp_write_only]=""
# shellcheck disable=SC2206
order=($NATIVES sluice)
[ -z "$SLUICE_B" ] || order+=(sluiceb)
for test in $CATCHUP; do
  part catchup || continue
  TIMES=([n8]="" [n1]="" [sluice]="" [sluiceb]=""); CPUS=""; RSSS=""; CPUSB=""; RSSSB=""; EV=0
  for ((r = 0; r < ROUNDS; r++)); do
    backlog "$test" "$BACKLOG"
    for ((i = 0; i < ${#order[@]}; i++)); do
      c=${order[$(( (i + r) % ${#order[@]} ))]}
      echo "== $test round $((r + 1))/$ROUNDS: $c" >&2
      PROFILE_LABEL=$test-r$((r + 1))
      run_contender "$c"
    done
  done
  # shellcheck disable=SC2086
  t8=$(median ${TIMES[n8]}); ts=$(median ${TIMES[sluice]})
  # shellcheck disable=SC2086
  cpu=$(median $CPUS); rss=$(median $RSSS)
  SLUICE0[$test]=$(rate "$BACKLOG" "$ts")
  {
  # shellcheck disable=SC2086
  echo "| $test | native, 8 threads optimistic | $BACKLOG | $EV | $t8 | $(rate "$BACKLOG" "$t8") | $(rate "$EV" "$t8") | $(rates "$BACKLOG" ${TIMES[n8]}) | | | |"
  if [ -n "${TIMES[n1]}" ]; then
    # shellcheck disable=SC2086
    t1=$(median ${TIMES[n1]})
    # shellcheck disable=SC2086
    echo "| $test | native, 1 thread | $BACKLOG | $EV | $t1 | $(rate "$BACKLOG" "$t1") | $(rate "$EV" "$t1") | $(rates "$BACKLOG" ${TIMES[n1]}) | | | |"
  fi
  # shellcheck disable=SC2086
  echo "| $test | sluice, $WORKERS workers | $BACKLOG | $EV | $ts | $(rate "$BACKLOG" "$ts") | $(rate "$EV" "$ts") | $(rates "$BACKLOG" ${TIMES[sluice]}) | $cpu | $rss | **$(ratio "$t8" "$ts")** |"
  if [ -n "$SLUICE_B" ]; then
    # shellcheck disable=SC2086
    tb=$(median ${TIMES[sluiceb]})
    # shellcheck disable=SC2086
    echo "| $test | sluice $LABEL_B, $WORKERS workers | $BACKLOG | $EV | $tb | $(rate "$BACKLOG" "$tb") | $(rate "$EV" "$tb") | $(rates "$BACKLOG" ${TIMES[sluiceb]}) | $(median $CPUSB) | $(median $RSSSB) | **$(ratio "$t8" "$tb")** |"
  fi
  } | tee -a "$OUT"
done

if part latency; then
echo "== sluice at 0 ms and with ${LATENCY} ms added to each round trip to the target ($ROUNDS rounds, a backlog each)"
PROXY_PORT_FILE=$WORK/proxy.addr
"$WORK/latencyproxy" -upstream "127.0.0.1:$DST_PORT" -latency "$LATENCY" >"$PROXY_PORT_FILE" &
PROXY_PID=$!
until [ -s "$PROXY_PORT_FILE" ]; do sleep 0.1; done
PROXY_PORT=$(sed 's/.*://' "$PROXY_PORT_FILE")
declare -A LT LCPU LRSS LGROUPS LGROWN
variants=(zero lat lat_relaxed)
if [ -n "$SLUICE_B" ]; then
  # The same-run A/B: SLUICE_B at 0 ms and at +LATENCY ms, through a proxy of its own
  # in front of its own target.
  PROXYB_PORT_FILE=$WORK/proxyb.addr
  "$WORK/latencyproxy" -upstream "127.0.0.1:$DSTB_PORT" -latency "$LATENCY" >"$PROXYB_PORT_FILE" &
  PROXYB_PID=$!
  until [ -s "$PROXYB_PORT_FILE" ]; do sleep 0.1; done
  PROXYB_PORT=$(sed 's/.*://' "$PROXYB_PORT_FILE")
  variants+=(zero_b lat_b)
fi
nv=${#variants[@]}
for ((r = 0; r < ROUNDS; r++)); do
  for ((i = 0; i < nv; i++)); do
    v=${variants[$(( (i + r) % nv ))]}
    backlog oltp_write_only "$BACKLOG"
    echo "== latency round $((r + 1))/$ROUNDS: $v" >&2
    case $v in
      zero) read -r ts ev cpu rss < <(sluice_run "$WORKERS" "$DST_PORT") ;;
      lat) read -r ts ev cpu rss < <(sluice_run "$WORKERS" "$PROXY_PORT") ;;
      lat_relaxed) read -r ts ev cpu rss < <(sluice_run "$WORKERS" "$PROXY_PORT" relaxed) ;;
      zero_b) read -r ts ev cpu rss < <(sluice_run_as b "$WORKERS" "$DSTB_PORT") ;;
      lat_b) read -r ts ev cpu rss < <(sluice_run_as b "$WORKERS" "$PROXYB_PORT") ;;
    esac
    # The target transactions (groups) of the run and how many grew behind a busy worker:
    # the mean group size is what the round trip is paid for.
    read -r _ _ groups _ _ _ <"$WORK/extra"
    LT[$v]+=" $ts"; LCPU[$v]+=" $cpu"; LRSS[$v]+=" $rss"; LGROUPS[$v]+=" ${groups:-0}"
    LGROWN[$v]+=" $(field grown)"
  done
done
# shellcheck disable=SC2086
z=$(median ${LT[zero]})
zr=$(rate "$BACKLOG" "$z")
{
echo
echo "| workload | contender | txns | median time (s) | median txn/s | txn/s per round | CPU (s) | peak RSS (MB) | target transactions per round (grown) | of its own 0 ms rate (medians, same rounds) | of the write_only 0 ms median above |"
echo "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | --- | ---: | ---: |"
# shellcheck disable=SC2086
[ -z "$SLUICE_B" ] || zrb=$(rate "$BACKLOG" "$(median ${LT[zero_b]})")
for v in "${variants[@]}"; do
  z0=$zr
  case $v in
    zero) name="sluice, $WORKERS workers, 0 ms" ;;
    lat) name="sluice, $WORKERS workers, +${LATENCY} ms to the target" ;;
    lat_relaxed) name="sluice, $WORKERS workers, +${LATENCY} ms, commit-order relaxed" ;;
    zero_b) name="sluice $LABEL_B, $WORKERS workers, 0 ms"; z0=$zrb ;;
    lat_b) name="sluice $LABEL_B, $WORKERS workers, +${LATENCY} ms to the target"; z0=$zrb ;;
  esac
  # shellcheck disable=SC2086
  t=$(median ${LT[$v]}); lr=$(rate "$BACKLOG" "$t")
  # shellcheck disable=SC2086
  echo "| oltp_write_only | $name | $BACKLOG | $t | $lr | $(rates "$BACKLOG" ${LT[$v]}) | $(median ${LCPU[$v]}) | $(median ${LRSS[$v]}) | $(paste -d' ' <(tr ' ' '\n' <<<"${LGROUPS[$v]# }") <(tr ' ' '\n' <<<"${LGROWN[$v]# }") | awk '{ printf "%s%s (%s)", (NR > 1 ? ", " : ""), $1, $2 }') | **$(pct "$lr" "$z0")** | $( [ -n "${SLUICE0[oltp_write_only]}" ] && pct "$lr" "${SLUICE0[oltp_write_only]}") |"
done
} | tee -a "$OUT"
kill "$PROXY_PID"; PROXY_PID=""
[ -z "$PROXYB_PID" ] || { kill "$PROXYB_PID"; PROXYB_PID=""; }
fi

if part sweep; then
echo "== worker-count sweep (oltp_write_only, $SWEEP_BACKLOG transactions each)"
{
echo
echo "Host busy: both CPUs' busy share over the run (/proc/stat). Groups: target transactions; waited: groups"
echo "whose writeset overlapped two workers' uncommitted groups; chained: groups that overlapped one worker's"
echo "uncommitted groups and were queued behind them on it; most in flight: the most groups executing or"
echo "waiting to commit at once (sluice status, apply)."
echo
echo "| workers | txns | time (s) | txn/s | events/s | CPU (s) | peak RSS (MB) | host busy | target server CPU (s) | groups | waited | chained | most in flight |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
} | tee -a "$OUT"
STAGES=""
for w in $SWEEP; do
  backlog oltp_write_only "$SWEEP_BACKLOG"
  read -r ts ev cpu rss < <(sluice_run "$w" "$DST_PORT")
  read -r busy tcpu groups waited inflight chained <"$WORK/extra"
  echo "| $w | $SWEEP_BACKLOG | $ts | $(rate "$SWEEP_BACKLOG" "$ts") | $(rate "$ev" "$ts") | $cpu | $rss | $busy % | $tcpu | $groups | $waited | ${chained:--} | $inflight |" | tee -a "$OUT"
  STAGES+="$(stage_rows "$w" "$ts")"$'\n'
done
{
echo
echo "Where the time went, per stage, in seconds over the run (sluice_replication_stage_seconds_total, scraped"
echo "when the target had caught up; the worker row sums all workers; docs/manual/replication.md says what each"
echo "state is). A stage's states add up to its goroutines' lifetime: the run's time less sluice's start-up."
echo
echo "| workers | run (s) | stage | $(echo $STATES | sed 's/ / | /g') |"
echo "| ---: | ---: | --- |$(for _ in $STATES; do printf ' ---: |'; done)"
printf '%s' "$STAGES"
} | tee -a "$OUT"
fi
# shellcheck source=bench/replication_large.sh
. bench/replication_large.sh
if part large; then large_rows; fi
echo
echo "results written to $OUT"
