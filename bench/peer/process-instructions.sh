#!/usr/bin/env bash
# Counts the instructions Redis executes per processed task (valgrind's
# callgrind, Ir), which the load of a shared machine does not change:
# peerbench's process scenario (no-op handler, 100-byte payloads) against a
# private redis-server under callgrind, instrumented once most of the
# preload is in (the pending list holds 90 % of the N tasks), its counts
# zeroed when peerbench opens its window (CONFIG RESETSTAT: callgrind's
# --zero-before) and dumped when peerbench ends. Run for this checkout
# and, when BASE names another tree, for that tree, alternating, REPS
# times. One JSON line per run to $OUT. The redis-server (REDIS_SERVER)
# must have its symbols, for the zeroing and to read the profiles kept in
# $KEEP with callgrind_annotate: Debian's is stripped; docs/performance.md
# (2026-12-02, "where the Lua time goes") says how to build one.
#
#   BASE=/path/to/main REDIS_SERVER=/path/to/redis-server bench/peer/process-instructions.sh
#
# Environment: BASE (optional), REPS (1), N (20000), CONC (50), PAYLOAD (100
# bytes a task), PORT (6494),
# OUT (results-latest-instructions.jsonl), KEEP (a directory; unset: the
# profiles are removed), REDIS_SERVER (redis-server).
set -euo pipefail
cd "$(dirname "$0")"
REPS=${REPS:-1}; N=${N:-20000}; CONC=${CONC:-50}; PAYLOAD=${PAYLOAD:-100}; PORT=${PORT:-6494}
OUT=${OUT:-results-latest-instructions.jsonl}; RS=${REDIS_SERVER:-redis-server}; GO=${GO:-go}
log() { printf '[process-instructions %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
log "building this checkout${BASE:+ and $BASE}"
"$GO" build -o bin/peerbench ./cmd/peerbench
if [ -n "${BASE:-}" ]; then
  (cd "$BASE/bench/peer" && "$GO" build -o "$OLDPWD/bin/peerbench-base" ./cmd/peerbench)
fi
W=$(mktemp -d); VG=""
cleanup() { if [ -n "$VG" ]; then kill "$VG" 2>/dev/null || true; wait "$VG" 2>/dev/null || true; fi; rm -rf "$W"; }
trap cleanup EXIT
run() { # label binary
  local label=$1 bin=$2
  valgrind --tool=callgrind --instr-atstart=no --zero-before=resetServerStats --callgrind-out-file="$W/cg.%p" "$RS" --port "$PORT" --bind 127.0.0.1 \
    --dir "$W" --save "" --appendonly no >"$W/vg.log" 2>&1 &
  VG=$!
  for _ in $(seq 200); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.2; done
  "$bin" -addr "127.0.0.1:$PORT" -scenario process -n "$N" -conc "$CONC" -payload "$PAYLOAD" -impl htq -label "$label" -timeout 900s >"$W/pb.json" 2>"$W/pb.err" &
  local pb=$! l
  while :; do
    l=$(redis-cli -p "$PORT" llen 'htq:{bench}:pending' 2>/dev/null || echo 0)
    [ "${l:-0}" -ge $((N * 9 / 10)) ] && break
    kill -0 "$pb" 2>/dev/null || { log "peerbench ended before the preload was seen"; cat "$W/pb.err" >&2; return 1; }
    sleep 0.02
  done
  callgrind_control -i on "$VG" >/dev/null
  wait "$pb"
  callgrind_control -d "$label" "$VG" >/dev/null
  kill "$VG"; wait "$VG" 2>/dev/null || true; VG=""
  local f ir
  f=$(ls "$W"/cg.*.1) # the dump; the file written at exit holds the shutdown
  ir=$(grep -m1 '^summary:' "$f" | awk '{print $2}')
  python3 - "$W/pb.json" "$ir" "$N" >>"$OUT" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read())
ir, n = int(sys.argv[2]), int(sys.argv[3])
print(json.dumps({"scenario": "process-instructions", "label": r["label"], "conc": r["conc"], "n": n, "payload_bytes": r.get("payload_bytes"),
                  "redis_instructions_per_task": ir // n, "redis_scripts_per_task": r["redis_scripts_per_task"],
                  "redis_cmds_per_task": r["redis_cmds_per_task"]}))
PY
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP"; mv "$f" "$KEEP/$label-$(date +%H%M%S).cg"; fi
  rm -f "$W"/cg.*
  tail -1 "$OUT" >&2
}
: >"$OUT"
for rep in $(seq "$REPS"); do
  run this bin/peerbench
  if [ -n "${BASE:-}" ]; then run base bin/peerbench-base; fi
done
