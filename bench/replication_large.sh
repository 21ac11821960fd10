# shellcheck shell=bash
# The large-transaction rows of bench/replication.sh (PARTS=large, issue 34):
# one source transaction of LARGE_ROWS*2 rows written by INSERT ... SELECT,
# one UPDATE of LARGE_ROWS rows and one DELETE of LARGE_ROWS rows, each
# applied by the native replica with 8 threads and by sluice alone, with
# every replica stopped while the source writes it, as a replica that was
# down or behind sees a purge, backfill or archival UPDATE. Sourced by
# replication.sh, which defines sql, native, sluice_run, rate, ratio and the
# sandboxes; the order of the two contenders alternates from row to row.
#
# Env: LARGE_ROWS (500000)

large_rows() {
  local rows=${LARGE_ROWS:-500000} step stmt t0 ts tn ev cpu rss first=n8 n src_t npid g0 g1 ncpu scpu
  # The replicas' server CPU seconds: what each applier made its server
  # do, which a busy host's scheduling distorts less than wall time.
  npid=$(cat "$(sql "$REP8_PORT" "SELECT @@pid_file")")
  echo "== large transactions: INSERT ... SELECT of $((2 * rows)) rows, UPDATE of $rows, DELETE of $rows"
  sql "$SRC_PORT" "CREATE TABLE sbtest.big (id INT PRIMARY KEY, k INT NOT NULL, pad CHAR(60) NOT NULL, KEY (k))"
  # The DDL reaches both before the timed rows (it is not what is measured).
  native "$REP8_PORT" >/dev/null
  sluice_run "$WORKERS" "$DST_PORT" >/dev/null
  {
  echo
  echo "Large transactions: each row is one source transaction, written while every replica was stopped,"
  echo "then applied by each contender alone (the native replica with 8 threads, optimistic; sluice with"
  echo "$WORKERS workers, whose time includes its start-up and its own fetch of the transaction). Table"
  echo "\`(id INT PRIMARY KEY, k INT, pad CHAR(60), KEY (k))\`. Peak RSS is sluice's whole process."
  echo
  echo "Server CPU: the replica server's CPU seconds while it applied (the native replica's own, sluice's target's)."
  echo
  echo "| transaction | rows | source (s) | native 8 threads (s) | native rows/s | native server CPU (s) | sluice (s) | sluice rows/s | sluice CPU (s) | sluice peak RSS (MB) | sluice target server CPU (s) | sluice / native |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  } | tee -a "$OUT"
  for step in insert update delete; do
    case $step in
      insert) n=$((2 * rows))
        stmt="INSERT INTO sbtest.big SELECT seq, seq, RPAD(CONCAT('p', seq), 60, 'x') FROM sbtest.seq_1_to_$n" ;;
      update) n=$rows
        stmt="UPDATE sbtest.big SET k = k + 1000, pad = CONCAT(LEFT(pad, 59), 'y') WHERE id % 2 = 1" ;;
      delete) n=$rows
        stmt="DELETE FROM sbtest.big WHERE id % 2 = 0" ;;
    esac
    t0=$(now)
    sql "$SRC_PORT" "$stmt"
    src_t=$(secs "$t0" "$(now)")
    echo "== large $step: $n rows on the source in $src_t s; $first first" >&2
    if [ "$first" = n8 ]; then
      g0=$(pid_ticks "$npid"); tn=$(native "$REP8_PORT"); g1=$(pid_ticks "$npid")
      read -r ts ev cpu rss < <(sluice_run "$WORKERS" "$DST_PORT")
      first=sluice
    else
      read -r ts ev cpu rss < <(sluice_run "$WORKERS" "$DST_PORT")
      g0=$(pid_ticks "$npid"); tn=$(native "$REP8_PORT"); g1=$(pid_ticks "$npid")
      first=n8
    fi
    ncpu=$(awk -v a="$g0" -v b="$g1" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", (b - a) / hz }')
    read -r _ scpu _ <"$WORK/extra"
    echo "| $step | $n | $src_t | $tn | $(rate "$n" "$tn") | $ncpu | $ts | $(rate "$n" "$ts") | $cpu | $rss | $scpu | **$(ratio "$tn" "$ts")** |" | tee -a "$OUT"
  done
  # All three servers must hold the same rows.
  local want got
  want=$(sql "$SRC_PORT" "CHECKSUM TABLE sbtest.big EXTENDED" | awk '{print $2}')
  for port in $REP8_PORT $DST_PORT; do
    got=$(sql "$port" "CHECKSUM TABLE sbtest.big EXTENDED" | awk '{print $2}')
    [ "$got" = "$want" ] || { echo "replication: sbtest.big on :$port has checksum $got, the source $want" >&2; exit 2; }
  done
  sql "$SRC_PORT" "DROP TABLE sbtest.big"
  native "$REP8_PORT" >/dev/null
  sluice_run "$WORKERS" "$DST_PORT" >/dev/null
}
