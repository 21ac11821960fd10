#!/usr/bin/env bash
# run.sh [RUN regex]: runs dtm v1.19.0's own test files (files.txt, read
# from the Go module cache) against sluice's coordinator, with
# adapter_test.go in place of dtm's in-process helpers. The run is assembled
# in a temporary directory; the repository holds no dtm code.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
run=${1:-${RUN:-.}}
export PATH="$PATH:/usr/sbin"
dtm=$(cd "$here" && go mod download -json github.com/dtm-labs/dtm@v1.19.0 | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ ! -d "$dtm/test" ]; then
  echo "run.sh: dtm v1.19.0 is not in the Go module cache (fix: check the network to proxy.golang.org)" >&2
  exit 1
fi
# dtm's tests use fixed ports (36789, 36790 and 6379 here, 8081 and 58081
# in dtm's busi). 36789, 36790 and 58081 lie in Linux's ephemeral range,
# where any outgoing connection on the machine may hold one for a while
# (a CI run failed so): as root, keep them out of that range.
ports=36789,36790,58081
if [ -w /proc/sys/net/ipv4/ip_local_reserved_ports ]; then
  cur=$(cat /proc/sys/net/ipv4/ip_local_reserved_ports)
  echo "${cur:+$cur,}$ports" >/proc/sys/net/ipv4/ip_local_reserved_ports || true
fi
work=$(mktemp -d)
# A dtm test that panics ends the test process at once, past its deferred
# stops: the business MariaDB and Redis it started would run on. On exit,
# stop the servers of every dtmconf directory whose owner is gone.
reap() {
  local f pid dir
  for f in "${TMPDIR:-/tmp}"/dtmconf*/owner.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then continue; fi
    dir=$(dirname "$f")
    pkill -9 -f -- "$dir/" 2>/dev/null || true
    rm -rf "$dir"
  done
}
trap 'reap; rm -rf "$work"' EXIT
sed "s#=> ../..#=> $root#" "$here/go.mod" >"$work/go.mod"
cp "$here/go.sum" "$work/go.sum"
grep -v '^#' "$here/files.txt" | while read -r f; do
  [ -n "$f" ] && cp "$dtm/test/$f" "$work/$f"
done
cp "$here/adapter_test.go" "$work/"
chmod -R u+w "$work"
cd "$work"
export DTM_DIR="$dtm"
go mod tidy >/dev/null 2>&1 || go mod tidy
# Tests listed in exceptions.txt (name, then the reason) are skipped: the
# list, with reasons, is what sluice does not do as dtm does.
# awk alone: grep -v exits 1 on a list of comments only, which pipefail
# turned into a silent exit 1 of the whole run.
skip=$(awk '!/^#/ && NF {print $1}' "$here/exceptions.txt" | paste -sd'|' -)
go test -tags dtmconformance -count=1 -timeout 20m -v -run "$run" ${skip:+-skip "^($skip)\$"} .
