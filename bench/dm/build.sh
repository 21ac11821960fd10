#!/usr/bin/env bash
# Builds TiDB DM (dm-master, dm-worker, dm-ctl) from the Go module proxy,
# once, into a cache directory outside the repository, and prints that
# directory. A second run finds the binaries and returns at once.
#
# The version is the one measured to build here (../shared/notes/
# environment.md): tiflow at this pseudo-version, built inside a copy of its
# own module so that its go.mod's replace list applies; sarama's pingcap fork
# is not in the checksum database (GONOSUMDB). About 12 minutes and 3.1 GB
# at its peak on a 2-core machine.
set -euo pipefail
VER=${DM_VERSION:-v0.0.0-20260202075306-0ea757eae77a}
CACHE=${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}}/sluice-dm/$VER
bins=(dm-master dm-worker dm-ctl)
have=1
for b in "${bins[@]}"; do [ -x "$CACHE/$b" ] || have=0; done
if [ $have = 1 ]; then echo "$CACHE"; exit 0; fi

export GONOSUMDB=github.com/pingcap/sarama GOFLAGS=-mod=mod
echo "dm: building DM $VER into $CACHE (once; about 12 minutes)" >&2
dir=$(go mod download -json "github.com/pingcap/tiflow@$VER" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$dir" ] || { echo "dm: go mod download of github.com/pingcap/tiflow@$VER gave no directory" >&2; exit 1; }
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"
mkdir -p "$CACHE.tmp"
start=$(date +%s)
for b in "${bins[@]}"; do
  echo "dm: go build ./cmd/$b ($(( $(date +%s) - start )) s so far)" >&2
  (cd "$work/src" && go build -o "$CACHE.tmp/$b" "./cmd/$b")
done
rm -rf "$CACHE"
mkdir -p "$(dirname "$CACHE")"
mv "$CACHE.tmp" "$CACHE"
echo "dm: built in $(( $(date +%s) - start )) s" >&2
echo "$CACHE"
