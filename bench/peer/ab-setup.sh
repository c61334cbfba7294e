# Sourced by run-ab.sh, run-embcommit.sh and run-process.sh, which compare
# this checkout with another (BASE) in one run: builds both peerbench
# binaries (bin/peerbench, and bin/peerbench-base when BASE is set) and
# starts a private redis-server without persistence on 127.0.0.1:$PORT,
# stopped and removed on exit. Expects PORT, GO and a log function (BASE
# optional); sets DATA (a scratch directory removed on exit) and REDIS_PID.

log "building this checkout${BASE:+ and $BASE}"
"$GO" build -o bin/peerbench ./cmd/peerbench
if [ -n "${BASE:-}" ]; then
  (cd "$BASE/bench/peer" && "$GO" build -o "$OLDPWD/bin/peerbench-base" ./cmd/peerbench)
fi

if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  log "something already listens on 127.0.0.1:$PORT; refusing to FLUSHALL it (set PORT)"; exit 1
fi
DATA=$(mktemp -d)
REDIS_PID=""
cleanup() {
  if [ -n "$REDIS_PID" ] && kill -0 "$REDIS_PID" 2>/dev/null; then
    kill -TERM "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null || true
  fi
  rm -rf "$DATA"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
redis-server --port "$PORT" --bind 127.0.0.1 --dir "$DATA" --save "" --appendonly no \
  --logfile redis.log --daemonize no &
REDIS_PID=$!
for _ in $(seq 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
log "redis-server pid $REDIS_PID on 127.0.0.1:$PORT"
