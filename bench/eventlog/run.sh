#!/usr/bin/env bash
# What the event log costs Redis per task: BenchmarkEventLog (internal/rdb)
# of this checkout, log off and on, against a baseline build (BASE, default
# main) in the same run, in alternating order, RUNS times each. A baseline
# without an event log gets this checkout's benchmark with the log option
# taken out (its mode is reported as log=base). Prints the raw benchmark
# lines with the load average; docs/performance.md ("Event log") reads them.
#
#   bench/eventlog/run.sh > bench/eventlog/results/$(date +%F).txt
#   BASE=ddc2474 RUNS=3 N=20000 bench/eventlog/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BASE=${BASE:-main}
RUNS=${RUNS:-7}
N=${N:-50000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git archive "$BASE" | tar -x -C "$tmp"
if ! grep -q EventLogSize "$tmp/internal/rdb/rdb.go"; then
  sed -e 's/for _, size := range \[\]int{-1, 0} {/for _, size := range []int{-1} {/' \
      -e 's/name := "log=on"/name := "log=base" \/\/ the baseline has no event log/' \
      -e '/if size < 0 {/,+2d' \
      -e 's/br := New(c, Options{EventLogSize: logSize})/br := New(c, Options{})\n\t_ = logSize/' \
      internal/rdb/bench_events_test.go > "$tmp/internal/rdb/bench_events_test.go"
  if ! grep -q 'ParseURL(rawURL string) (rueidis.ClientOption, URLSettings, error)' "$tmp/internal/rdb/url.go"; then
    sed -i 's/co, _, err := ParseURL/co, err := ParseURL/' "$tmp/internal/rdb/bench_events_test.go"
  fi
  base_modes="base"
else
  base_modes="on"
fi
(cd "$tmp" && go test -c -o "$tmp/base.test" ./internal/rdb)
go test -c -o "$tmp/this.test" ./internal/rdb
echo "# base $(git rev-parse --short "$BASE"), this $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with uncommitted changes)'), $N tasks a run, $(redis-server --version | cut -d' ' -f3)"
for i in $(seq "$RUNS"); do
  for shape in single batch; do
    modes="base:$base_modes this:off this:on"
    if [ $((i % 2)) = 0 ]; then modes="this:on this:off base:$base_modes"; fi
    for m in $modes; do
      bin=${m%%:*} mode=${m#*:}
      echo "== run=$i shape=$shape build=$bin mode=$mode load=$(cut -d' ' -f1-3 /proc/loadavg)"
      nice "$tmp/$bin.test" -test.run XXX -test.bench "EventLog/$shape/log=$mode\$" -test.benchtime "${N}x" | grep '^Benchmark'
    done
  done
done
