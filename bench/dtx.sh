#!/usr/bin/env bash
# bench/dtx.sh: the DTM seed's table on a sandbox MariaDB, in one run:
# sysbench oltp_write_only, TransOut/TransIn without a coordinator, and the
# same saga through sluice dtx and through dtm v1.19.0 (built from the Go
# module into a cache outside the repo, reused when present). The rows
# "sluice (Redis store)" and "dtm (Redis store)" share one redis-server
# (appendonly yes, appendfsync always) started by the driver. The gRPC rows
# submit through dtm's gRPC API (sluice --grpc-listen, dtm's GrpcPort) and
# call gRPC branches of the same business service.
#
# Env: DURATION (default 15s), ROUNDS (1), THREADS (10,64), DTM_CACHE
# (~/.cache/sluice-bench/dtm-v1.19.0), SKIP_DTM=1 to run without dtm.
# Extra arguments go to the driver (go run ./bench/dtx -h).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin"
DTM_VERSION=v1.19.0
DTM_CACHE=${DTM_CACHE:-$HOME/.cache/sluice-bench/dtm-$DTM_VERSION}
dtm_bin="$DTM_CACHE/dtm"
modcache=$(go env GOMODCACHE)
dtm_src="$modcache/github.com/dtm-labs/dtm@$DTM_VERSION"

# Always rebuild: a stale binary would measure old code (the build is incremental).
go build -o bin/sluice ./cmd/sluice
dtm_args=()
if [ "${SKIP_DTM:-0}" != 1 ]; then
  [ -d "$dtm_src" ] || go mod download "github.com/dtm-labs/dtm@$DTM_VERSION"
  if [ ! -x "$dtm_bin" ]; then
    echo "building dtm $DTM_VERSION into $DTM_CACHE (a cold build takes about 9 minutes)" >&2
    mkdir -p "$DTM_CACHE"
    rm -rf "$DTM_CACHE/src"
    cp -r "$dtm_src" "$DTM_CACHE/src"
    chmod -R u+w "$DTM_CACHE/src"
    (cd "$DTM_CACHE/src" && GOFLAGS=-mod=mod nice -n 19 go build -o "$dtm_bin" .)
  fi
  dtm_args=(-dtm "$dtm_bin" -dtm-sql "$dtm_src/sqls/dtmsvr.storage.mysql.sql")
fi
go build -o bin/dtx-bench ./bench/dtx
exec flock -o /tmp/sluice-bench.lock bin/dtx-bench -sluice bin/sluice \
  -duration "${DURATION:-15s}" -rounds "${ROUNDS:-1}" -threads "${THREADS:-10,64}" "${dtm_args[@]}" "$@"
