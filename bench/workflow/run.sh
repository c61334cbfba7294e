#!/usr/bin/env bash
# Runs wfbench (chain of 1,000 tasks, fan-in of 10,000 → 1; each with its
# baseline of plain tasks) REPS times (default 3) on a private
# redis-server and on the embedded store, and appends the JSON lines to
# results-latest.jsonl (or OUT) beside this script. The redis-server is
# started on 127.0.0.1:$PORT (default 6393; the script refuses a port
# something listens on) without persistence, and stopped by its PID.
#
#   bench/workflow/run.sh
#   REPS=1 bench/workflow/run.sh
set -eu
cd "$(dirname "$0")"
OUT=${OUT:-results-latest.jsonl}
PORT=${PORT:-6393}
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  echo "something already listens on 127.0.0.1:$PORT; set PORT" >&2
  exit 1
fi
mkdir -p bin
go build -o bin/wfbench .
DATA=$(mktemp -d)
redis-server --port "$PORT" --bind 127.0.0.1 --dir "$DATA" --save "" --appendonly no --daemonize no >/dev/null &
REDIS_PID=$!
trap 'kill -TERM $REDIS_PID 2>/dev/null; wait $REDIS_PID 2>/dev/null; rm -rf "$DATA"' EXIT
until redis-cli -p "$PORT" ping >/dev/null 2>&1; do sleep 0.1; done
echo "{\"scenario\":\"machine\",\"nproc\":$(nproc),\"loadavg\":\"$(cut -d' ' -f1-3 /proc/loadavg)\",\"redis_version\":\"$(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')\",\"reps\":${REPS:-3}}" | tee -a "$OUT"
for run in $(seq 1 "${REPS:-3}"); do
  for scenario in chain fanin; do
    redis-cli -p "$PORT" flushall >/dev/null
    bin/wfbench -run "$run" -scenario "$scenario" -storage "redis://127.0.0.1:$PORT/0"
    bin/wfbench -run "$run" -scenario "$scenario" -storage file:
  done
done 2>/dev/null | tee -a "$OUT"
echo "{\"scenario\":\"machine-end\",\"loadavg\":\"$(cut -d' ' -f1-3 /proc/loadavg)\"}" | tee -a "$OUT"
