#!/bin/bash
# A/B: main (base) vs h-fetchid, alternated, 3 rounds each.
cd /tmp/fetchid-base && nice go test -c -o /tmp/fetchid-base.test ./internal/rdb/
cd /work/wt-fetchid && nice go test -c -o /tmp/fetchid-new.test ./internal/rdb/
for r in 1 2 3; do
  for v in base new; do
    echo "== round $r $v $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
    (cd /work/wt-fetchid/internal/rdb && /tmp/fetchid-$v.test -test.run XXX -test.bench 'ProcessCost$|ProcessSplit' -test.benchtime 64000x -test.count 1 2>&1 | grep -v '^goos\|^goarch\|^pkg\|^cpu')
  done
done
