#!/usr/bin/env bash
# Runs htq's reliability suites in their full versions (make chaos), one
# after the other, and prints each one's figures (the FIGURE lines) and
# result. Logs go to CHAOS_LOG_DIR (default: a new directory under /tmp).
# docs/reliability.md describes the suites and quotes a run's figures.
set -uo pipefail
cd "$(dirname "$0")/.."
log=${CHAOS_LOG_DIR:-$(mktemp -d /tmp/htq-chaos-XXXXXX)}
mkdir -p "$log"
echo "logs in $log"
status=0
started=$(date +%s)

# run NAME COMMAND…: runs one suite, logs it to $log/NAME.log, prints its
# figures and result lines.
run() {
  local name=$1
  shift
  local t0
  t0=$(date +%s)
  echo "== $name: $*"
  if ! "$@" >"$log/$name.log" 2>&1; then
    status=1
    echo "   FAILED: see $log/$name.log"
  fi
  grep -hE 'FIGURE|^(--- |ok |FAIL)|round [0-9]+:.*acknowledged|failover.*promoted' "$log/$name.log" | cut -c1-2000
  echo "   ($(($(date +%s) - t0)) s)"
}

# Suites 1-7 and 9 (the chaos folder), full size.
run chaos env HTQ_CHAOS=full go test -race -count=1 -timeout 40m -v ./chaos/
# Suite 7: the embedded store's kill -9 loop, 50 rounds (HTQ_CRASH_ITERATIONS=100 for
# the reliability goal T8; about 5 s a round on a busy machine).
run embedded-kill9 env HTQ_CRASH_ITERATIONS="${HTQ_CRASH_ITERATIONS:-50}" go test -race -count=1 -timeout 20m -v \
  -run 'TestKill9Durability|TestLockKilledHolder' ./internal/embedded
# Suite 6: the conformance suite and the main paths on a 3-primary Redis
# Cluster, and the enqueue-only Sentinel failover test.
run redis-cluster-sentinel go test -race -count=1 -timeout 20m -v \
  -run 'TestConformanceCluster|TestCluster|TestSentinel' ./internal/rdb
# The library's own kill, SIGTERM and outage tests.
run library-faults go test -race -count=1 -timeout 10m -v \
  -run 'TestKilledWorkerLosesNothing|TestSIGTERM|TestOutage|TestRecoverAfterOutage' .
# Suite 9: the target guard's own tests.
run dispatch-guard go test -race -count=1 -timeout 10m -v \
  -run 'TestGuard|TestTimeouts|TestRedirects|TestEndlessBody|TestNoProxyFromEnvironment' ./internal/dispatch

echo "== all suites: $(($(date +%s) - started)) s, $([ $status = 0 ] && echo passed || echo FAILED)"
exit $status
