#!/usr/bin/env bash
# Redis time per task of the commands a plain task costs in each layout
# (taskform.lua), alternating the layouts REPS times against a private
# redis-server; prints one JSON line per run (µs for N tasks). Under load
# the minimum over runs is the cost without preemption.
#
#   bench/peer/taskform/run.sh            # PORT=6449 REPS=41 N=2000 MSG=121 BATCH=8
set -euo pipefail
cd "$(dirname "$0")"
PORT=${PORT:-6449}
REPS=${REPS:-41}
N=${N:-2000}
MSG=${MSG:-121} # the message of a 100-byte task of type bench:noop
BATCH=${BATCH:-8} # tasks per fetch (about what Concurrency 10 fetches)
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  echo "something listens on 127.0.0.1:$PORT (set PORT)" >&2; exit 1
fi
DATA=$(mktemp -d)
redis-server --port "$PORT" --bind 127.0.0.1 --dir "$DATA" --save "" --appendonly no --daemonize no --logfile "" >/dev/null &
PID=$!
trap 'kill -TERM $PID; wait $PID 2>/dev/null || true; rm -rf "$DATA"' EXIT
for _ in $(seq 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
printf '{"scenario":"loadavg","loadavg":"%s","time":"%s"}\n' "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u +%FT%TZ)"
for rep in $(seq "$REPS"); do
  case $((rep % 3)) in
    1) order="hash string hash-mget" ;;
    2) order="string hash-mget hash" ;;
    0) order="hash-mget hash string" ;;
  esac
  for layout in $order; do
    r=$(redis-cli -p "$PORT" --eval taskform.lua , "$layout" "$N" "$MSG" "$BATCH" | tr '\n' ' ')
    read -r enq fetch del <<<"$r"
    printf '{"scenario":"taskform","layout":"%s","run":%d,"n":%d,"msg_bytes":%d,"batch":%d,"enqueue_us":%s,"fetch_read_us":%s,"delete_us":%s}\n' \
      "$layout" "$rep" "$N" "$MSG" "$BATCH" "$enq" "$fetch" "$del"
  done
done
printf '{"scenario":"loadavg","loadavg":"%s","time":"%s"}\n' "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u +%FT%TZ)"
