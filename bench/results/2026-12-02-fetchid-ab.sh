#!/bin/bash
# A/B of the rdb process benchmarks: BASE (a checkout of main before the
# fetch record) against this checkout, alternated, 3 rounds each.
#   BASE=/path/to/base-checkout bench/results/2026-12-02-fetchid-ab.sh
set -e
here=$(git rev-parse --show-toplevel)
out=$(mktemp -d)
(cd "${BASE:?set BASE to a checkout of the base commit}" && nice go test -c -o "$out/base.test" ./internal/rdb/)
(cd "$here" && nice go test -c -o "$out/new.test" ./internal/rdb/)
for r in 1 2 3; do
  for v in base new; do
    echo "== round $r $v $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
    (cd "$here/internal/rdb" && "$out/$v.test" -test.run XXX -test.bench 'ProcessCost$|ProcessSplit' -test.benchtime 64000x -test.count 1 2>&1 | grep -v '^goos\|^goarch\|^pkg\|^cpu')
  done
done
