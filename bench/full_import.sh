#!/usr/bin/env bash
# Full-import benchmark: sluice migrate against mydumper+myloader and
# mariadb-dump | mariadb, on the same sandbox pair and the same sysbench data
# (TABLES x TABLE_SIZE rows), in alternating order, ROUNDS times; prints the
# MB/s of each, the medians and the ratio sluice / mydumper+myloader, and
# records them in docs/benchmarks/full-import.md.
#
# Env: TABLES (4) TABLE_SIZE (1000000) THREADS (4) POOL (4) ROUNDS (3)
#      BUFFER_POOL (2G) SLUICE (bin/sluice) DOC (docs/benchmarks/full-import.md)
#      CONTENDERS: run only these (of sluice_auto sluice_chunk mydumper
#        mariadb_dump floor sluice_b), for an A/B on a busy machine: prints
#        each one's median, sluice's CPU seconds and the ratio to the floor,
#        skips the single-table part and records nothing in DOC.
#      SLUICE_B: a second sluice binary, the contender sluice_b (default mode
#        like sluice_auto), e.g. the build of another commit.
#      PROFILE_DIR: write each sluice run's CPU and allocation profiles there
#        (SLUICE_CPUPROFILE, SLUICE_MEMPROFILE).
set -euo pipefail

# Benchmarks never overlap: take the shared lock (re-exec under flock).
if [ -z "${SLUICE_BENCH_LOCKED:-}" ]; then
  export SLUICE_BENCH_LOCKED=1
  exec flock -o /tmp/sluice-bench.lock "$0" "$@"
fi

cd "$(dirname "$0")/.."
TABLES=${TABLES:-4}
TABLE_SIZE=${TABLE_SIZE:-1000000}
THREADS=${THREADS:-4}
POOL=${POOL:-4}
ROUNDS=${ROUNDS:-3}
BUFFER_POOL=${BUFFER_POOL:-2G}
SLUICE=${SLUICE:-$PWD/bin/sluice}
DOC=${DOC:-$PWD/docs/benchmarks/full-import.md}
CHUNK=${CHUNK:-50000}

for tool in sysbench mydumper myloader mariadb-dump mariadb; do
  command -v "$tool" >/dev/null || { echo "full_import: $tool is missing (run 'make deps')" >&2; exit 2; }
done
[ -x "$SLUICE" ] || { echo "full_import: $SLUICE is missing (run 'make build')" >&2; exit 2; }

WORK=$(mktemp -d /tmp/sluice-fullimport.XXXXXX)
export SLUICE_HOME=$WORK/home
cleanup() {
  "$SLUICE" sandbox down --name fi_src --purge >/dev/null 2>&1 || true
  "$SLUICE" sandbox down --name fi_dst --purge >/dev/null 2>&1 || true
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
SRC_PORT=$(free_port)
DST_PORT=$(free_port)
while [ "$DST_PORT" = "$SRC_PORT" ]; do DST_PORT=$(free_port); done

echo "== sandboxes: source :$SRC_PORT, target :$DST_PORT, innodb_buffer_pool_size=$BUFFER_POOL (same for every contender)"
"$SLUICE" sandbox up --name fi_src --port "$SRC_PORT" --buffer-pool "$BUFFER_POOL" >/dev/null
"$SLUICE" sandbox up --name fi_dst --port "$DST_PORT" --buffer-pool "$BUFFER_POOL" >/dev/null
SRC=(mariadb -h127.0.0.1 -P"$SRC_PORT" -uroot)
DST=(mariadb -h127.0.0.1 -P"$DST_PORT" -uroot)

echo "== sysbench prepare: $TABLES tables x $TABLE_SIZE rows"
"${SRC[@]}" -e "CREATE DATABASE sbtest"
sysbench oltp_insert --tables="$TABLES" --table-size="$TABLE_SIZE" --threads="$TABLES" \
  --mysql-host=127.0.0.1 --mysql-port="$SRC_PORT" --mysql-user=root --mysql-db=sbtest --db-driver=mysql prepare >/dev/null

cat >"$WORK/task.yaml" <<EOF
name: fullimport
source: {host: 127.0.0.1, port: $SRC_PORT, user: root, password: ""}
target: {host: 127.0.0.1, port: $DST_PORT, user: root, password: ""}
tables: {include: ["sbtest.*"]}
threads: $THREADS
pool-size: $POOL
rows-per-chunk: $CHUNK
EOF

reset_target() {
  "${DST[@]}" -e "DROP DATABASE IF EXISTS sbtest; DROP DATABASE IF EXISTS sluice_meta; RESET MASTER;"
}
now() { date +%s.%N; }
mbs() { awk -v mb="$MB" -v s="$1" 'BEGIN { printf "%.1f", mb / s }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

# The data size every MB/s is computed from: the sluice text form of the
# rows (tab-separated, what LOAD DATA reads), measured once by a dump.
"$SLUICE" dump --config "$WORK/task.yaml" --dir "$WORK/size" --progress-every 1h >"$WORK/size.log"
BYTES=$(du -cb "$WORK"/size/*.tsv | tail -1 | cut -f1)
MB=$(awk -v b="$BYTES" 'BEGIN { printf "%.2f", b / 1e6 }')
# The floor row loads these same rows: one file per table (its chunks in key
# order), and the table's CREATE statement from the source.
mkdir -p "$WORK/floor"
for t in $(seq 1 "$TABLES"); do
  cat $(ls "$WORK"/size/sbtest.sbtest$t.*.tsv | sort) >"$WORK/floor/sbtest$t.tsv"
  "${SRC[@]}" -N --raw -e "SHOW CREATE TABLE sbtest.sbtest$t" | cut -f2 >"$WORK/floor/sbtest$t.sql"
done
rm -rf "$WORK/size"
echo "== data: $MB MB as text ($(du -sh "$WORK/home/fi_src/data/sbtest" | cut -f1) on disk)"

declare -A T
# sluice_run NAME ROUND BIN ARGS...: one migrate, its CPU seconds (user+sys,
# from bash's time) in T[NAME_cpu,ROUND], its profiles in PROFILE_DIR.
sluice_run() {
  local name=$1 round=$2 bin=$3
  shift 3
  local prof=()
  if [ -n "${PROFILE_DIR:-}" ]; then
    mkdir -p "$PROFILE_DIR"
    prof=(SLUICE_CPUPROFILE="$PROFILE_DIR/$name-r$round.cpu" SLUICE_MEMPROFILE="$PROFILE_DIR/$name-r$round.alloc")
  fi
  local TIMEFORMAT='%U %S'
  { time env "${prof[@]}" "$bin" migrate --config "$WORK/task.yaml" --mode full --target-binlog=false --progress-every 1h "$@" >"$WORK/out.log"; } 2>"$WORK/time.txt"
  T[${name}_cpu,$round]=$(awk '{ printf "%.2f", $1 + $2 }' "$WORK/time.txt")
}
run_sluice_auto() { sluice_run sluice_auto "$1" "$SLUICE"; }
run_sluice_chunk() { sluice_run sluice_chunk "$1" "$SLUICE" --commit-unit chunk; }
run_sluice_b() { sluice_run sluice_b "$1" "$SLUICE_B"; }
run_mydumper() {
  rm -rf "$WORK/md"
  local a b c
  a=$(now)
  mydumper -h 127.0.0.1 -P "$SRC_PORT" -u root -B sbtest -t "$THREADS" -r "$CHUNK" -o "$WORK/md" >/dev/null 2>&1
  b=$(now)
  myloader -h 127.0.0.1 -P "$DST_PORT" -u root -d "$WORK/md" -t "$POOL" >/dev/null 2>&1
  c=$(now)
  T[mydumper_dump,$1]=$(elapsed "$a" "$b")
  T[myloader_load,$1]=$(elapsed "$b" "$c")
  rm -rf "$WORK/md"
}
# The floor: the least work a logical load can do here. The rows are already
# in files (no dump runs), and the mariadb client loads each table with one
# LOAD DATA LOCAL INFILE into the empty table, all tables at once, with the
# checks and the binlog off: InnoDB's bulk insert path, nothing else.
run_floor() {
  "${DST[@]}" -e "CREATE DATABASE sbtest"
  local t pids=()
  for t in $(seq 1 "$TABLES"); do
    "${DST[@]}" sbtest <"$WORK/floor/sbtest$t.sql"
  done
  for t in $(seq 1 "$TABLES"); do
    "${DST[@]}" --local-infile=1 sbtest -e "SET SESSION sql_log_bin=0, unique_checks=0, foreign_key_checks=0;
      LOAD DATA LOCAL INFILE '$WORK/floor/sbtest$t.tsv' INTO TABLE sbtest$t CHARACTER SET binary
      FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n'" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { echo "full_import: the floor's LOAD DATA failed" >&2; exit 1; }; done
}
run_mariadb_dump() {
  { echo "SET sql_log_bin=0;"; mariadb-dump -h127.0.0.1 -P"$SRC_PORT" -uroot --single-transaction --databases sbtest; } | "${DST[@]}"
}

AB=${CONTENDERS:+1}
read -r -a CONTENDERS <<<"${CONTENDERS:-sluice_auto sluice_chunk mydumper mariadb_dump floor}"
for c in "${CONTENDERS[@]}"; do
  declare -F "run_$c" >/dev/null || { echo "full_import: unknown contender $c in CONTENDERS" >&2; exit 2; }
  if [ "$c" = sluice_b ]; then
    [ -x "${SLUICE_B:-}" ] || { echo "full_import: contender sluice_b needs SLUICE_B, an executable sluice binary" >&2; exit 2; }
  fi
done
for round in $(seq 1 "$ROUNDS"); do
  n=${#CONTENDERS[@]}
  for i in $(seq 0 $((n - 1))); do
    c=${CONTENDERS[$(( (i + round - 1) % n ))]}
    reset_target
    a=$(now)
    "run_$c" "$round"
    b=$(now)
    T[$c,$round]=$(elapsed "$a" "$b")
    for t in $(seq 1 "$TABLES"); do
      rows=$("${DST[@]}" -N -e "SELECT COUNT(*) FROM sbtest.sbtest$t")
      [ "$rows" = "$TABLE_SIZE" ] || { echo "full_import: $c loaded $rows rows into sbtest$t, want $TABLE_SIZE" >&2; exit 1; }
    done
    printf "round %d  %-14s %7.1f s  %7s MB/s%s\n" "$round" "$c" "${T[$c,$round]}" "$(mbs "${T[$c,$round]}")" \
      "${T[${c}_cpu,$round]:+  sluice CPU ${T[${c}_cpu,$round]} s}"
  done
done

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {if (NR%2) printf "%.1f\n", a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2}'; }
med() { local k=$1 v=(); for r in $(seq 1 "$ROUNDS"); do v+=("${T[$k,$r]}"); done; median "${v[@]}"; }

if [ -n "$AB" ]; then
  echo
  echo "A/B run $(date -u +"%Y-%m-%d %H:%M UTC"), $MB MB, medians of $ROUNDS rounds (load average $(cut -d" " -f1-3 /proc/loadavg) at the end):"
  for c in "${CONTENDERS[@]}"; do
    line=$(printf "%-14s %6s s  %6s MB/s" "$c" "$(med "$c")" "$(mbs "$(med "$c")")")
    [ -n "${T[${c}_cpu,1]:-}" ] && line+=$(printf "  sluice CPU %s s" "$(med "${c}_cpu")")
    if [[ " ${CONTENDERS[*]} " == *" floor "* ]] && [ "$c" != floor ]; then
      rs=()
      for r in $(seq 1 "$ROUNDS"); do rs+=("$(ratio "${T[floor,$r]}" "${T[$c,$r]}")"); done
      line+=$(printf "  %sx the floor (rounds %s)" "$(ratio "$(med floor)" "$(med "$c")")" "${rs[*]}")
    fi
    echo "$line"
  done
  exit 0
fi

# Single-table concurrency, as in the seed's mydumper -r comparison: one
# table dumped to files on $THREADS connections, cut into chunks of $CHUNK
# rows, against the same table as one chunk (one connection does the work).
one_table_dump() {
  sed 's/sbtest\.\*/sbtest.sbtest1/' "$WORK/task.yaml" >"$WORK/one.yaml"
  rm -rf "$WORK/one"
  local a b
  a=$(now)
  "$SLUICE" dump --config "$WORK/one.yaml" --dir "$WORK/one" --rows-per-chunk "$1" --progress-every 1h >/dev/null
  b=$(now)
  rm -rf "$WORK/one"
  elapsed "$a" "$b"
}
for round in $(seq 1 "$ROUNDS"); do
  T[one_chunked,$round]=$(one_table_dump "$CHUNK")
  T[one_whole,$round]=$(one_table_dump 1000000000)
done

S_AUTO=$(med sluice_auto); S_CHUNK=$(med sluice_chunk); MYD=$(med mydumper)
MYD_D=$(med mydumper_dump); MYL_L=$(med myloader_load); MDP=$(med mariadb_dump); FLOOR=$(med floor)
R_AUTO=$(ratio "$MYD" "$S_AUTO"); R_CHUNK=$(ratio "$MYD" "$S_CHUNK")
DATE=$(date -u +"%Y-%m-%d %H:%M UTC")

TABLE=$(cat <<EOF
Run $DATE on $(nproc) cores (load average $(cut -d" " -f1-3 /proc/loadavg) at the end; figures are medians of $ROUNDS alternating rounds).
Data: sysbench oltp_insert, $TABLES tables x $TABLE_SIZE rows, $MB MB as text. Both servers: MariaDB sandboxes with
innodb_buffer_pool_size=$BUFFER_POOL, everything else default (innodb_flush_log_at_trx_commit=1, binlog on).
Every contender loads with the target's binlog off for its session, as myloader does by default
(sluice --target-binlog=false, mariadb-dump piped after SET sql_log_bin=0).
Threads: $THREADS dump connections, $POOL load connections for sluice and mydumper/myloader; mariadb-dump is single-threaded.

| contender | dump (s) | load (s) | end to end (s) | end to end (MB/s) | vs mydumper+myloader |
| :-- | --: | --: | --: | --: | --: |
| sluice migrate (default: --commit-unit auto, each table one bulk LOAD DATA) | streamed | streamed | $S_AUTO | $(mbs "$S_AUTO") | ${R_AUTO}x |
| sluice migrate --commit-unit chunk (a transaction per chunk) | streamed | streamed | $S_CHUNK | $(mbs "$S_CHUNK") | ${R_CHUNK}x |
| mydumper -t $THREADS -r $CHUNK + myloader -t $POOL | $MYD_D ($(mbs "$MYD_D") MB/s) | $MYL_L ($(mbs "$MYL_L") MB/s) | $MYD | $(mbs "$MYD") | 1.00x |
| mariadb-dump --single-transaction \| mariadb | streamed | streamed | $MDP | $(mbs "$MDP") | $(ratio "$MYD" "$MDP")x |
| floor: the rows already in files, one LOAD DATA LOCAL per table by the \`mariadb\` client, all tables at once, checks and binlog off | none (files ready) | $FLOOR | $FLOOR | $(mbs "$FLOOR") | $(ratio "$MYD" "$FLOOR")x |

Against the goal (sluice end to end at least 2x mydumper+myloader, or at least 0.9x the floor where
the floor itself is under 2x): the floor is $(ratio "$MYD" "$FLOOR")x mydumper+myloader, so the bound that holds is
$(awk -v f="$(ratio "$MYD" "$FLOOR")" 'BEGIN { print (f >= 2) ? "2x mydumper+myloader" : "0.9x the floor" }'); sluice's default is $(ratio "$FLOOR" "$S_AUTO")x the floor and ${R_AUTO}x mydumper+myloader.

Single-table concurrency of \`sluice dump\` (one table, sbtest1, $(awk -v m="$MB" -v t="$TABLES" 'BEGIN { printf "%.1f", m / t }') MB, $THREADS connections):

| dump of one table | time (s) | MB/s |
| :-- | --: | --: |
| split into chunks of $CHUNK rows (\`--rows-per-chunk $CHUNK\`) | $(med one_chunked) | $(awk -v m="$MB" -v t="$TABLES" -v s="$(med one_chunked)" 'BEGIN { printf "%.1f", m / t / s }') |
| one chunk (one connection reads it) | $(med one_whole) | $(awk -v m="$MB" -v t="$TABLES" -v s="$(med one_whole)" 'BEGIN { printf "%.1f", m / t / s }') |

Command: \`make bench-full-import\` (bench/full_import.sh; env TABLES=$TABLES TABLE_SIZE=$TABLE_SIZE THREADS=$THREADS POOL=$POOL ROUNDS=$ROUNDS BUFFER_POOL=$BUFFER_POOL)
EOF
)
echo
echo "$TABLE"

# Record the table in the doc between its markers (the notes around it are
# written by hand).
if [ -f "$DOC" ] && grep -q '<!-- results:start -->' "$DOC"; then
  python3 - "$DOC" "$TABLE" <<'PY'
import sys
doc, table = sys.argv[1], sys.argv[2]
s = open(doc).read()
a = s.index('<!-- results:start -->') + len('<!-- results:start -->')
b = s.index('<!-- results:end -->')
open(doc, 'w').write(s[:a] + '\n' + table + '\n' + s[b:])
PY
  echo "recorded in $DOC"
fi
