#!/usr/bin/env bash
# Counts the instructions Redis executes per single-enqueue script call
# (valgrind's callgrind, Ir), which the load of a shared machine does not
# change: a private redis-server runs under callgrind, each script is
# loaded and called N times (redis-benchmark, one connection, 16 pipelined,
# fresh task IDs), and the counters are zeroed before and dumped after.
# Compares main's enqueue scripts (BASE, a tree of main) with this
# checkout's, for a pending task without a retention and for a task due in
# an hour with a retention (htq serve's). Under callgrind Redis is ~50x
# slower, so nearly every call is the first of its millisecond and
# enqueue_plain.lua's XTRIM runs on nearly every call: its figure is the
# worst case; the "notrim" line is the same script with the XTRIM never
# taken (a rate of many enqueues per millisecond).
#
#   BASE=/path/to/main bench/peer/script-instructions.sh
set -euo pipefail
cd "$(dirname "$0")"
BASE=${BASE:?set BASE to a tree of main}; N=${N:-5000}; PORT=${PORT:-6433}
THIS=$(cd ../.. && pwd)
W=$(mktemp -d); VG=""
cleanup() { [ -n "$VG" ] && kill "$VG" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
valgrind --tool=callgrind --callgrind-out-file="$W/cg.%p" redis-server --port "$PORT" --bind 127.0.0.1 \
  --dir "$W" --save "" --appendonly no >"$W/vg.log" 2>&1 &
VG=$!
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.2; done
lua() { cat "$1/internal/rdb/lua/$2.lua"; }
lua "$BASE" enqueue_plain >"$W/base-plain.lua"
{ lua "$BASE" lib; echo; lua "$BASE" lanelib; echo; lua "$BASE" enqueue; } >"$W/base-full.lua"
{ echo "local CHANNEL = 'htq:events'"; lua "$THIS" enqueue_plain; } >"$W/this-plain.lua"
sed 's/if string.byte(id, -1) == 48 and/if false and/' "$W/this-plain.lua" >"$W/this-plain-notrim.lua"
MSG=$(head -c 120 /dev/zero | tr '\0' 'x')"bench:noop-0123456789012345678901234567"
ID="aaaaaaaa-bbbb-cccc-dddd-__rand_int__"; TK="htq:{q}:t:$ID"; FUT=$(( $(date +%s%3N) + 3600000 ))
K8=("$TK" "htq:{q}:pending" "htq:{q}:scheduled" "htq:{q}:unique:" "htq:{q}:g:" "htq:{q}:groups" "htq:{q}:events" "htq:{q}:settings")
run() { # label script args...
  local label=$1 src=$2; shift 2
  redis-cli -p "$PORT" flushall >/dev/null
  local sha; sha=$(redis-cli -p "$PORT" script load "$(cat "$W/$src.lua")")
  redis-benchmark -p "$PORT" -c 1 -P 16 -n 1000 -r 2000000000 evalsha "$sha" "$@" >/dev/null 2>&1
  callgrind_control -z "$VG" >/dev/null
  redis-benchmark -p "$PORT" -c 1 -P 16 -n "$N" -r 2000000000 evalsha "$sha" "$@" >/dev/null 2>&1
  callgrind_control -d "$src" "$VG" >/dev/null
  local out ir; out=$(ls -t "$W"/cg.* | head -1); ir=$(grep -m1 '^summary:\|^totals:' "$out" | awk '{print $2}')
  printf '{"script":"%s","calls":%d,"instructions_per_call":%d}\n' "$label" "$N" $((ir / N))
}
for rep in 1 2; do
  run "base/pending (enqueue_plain, 7 ARGV)" base-plain 3 "$TK" "htq:{q}:pending" "htq:{q}:events" "$MSG" "$ID" htq:events q 0 "" 1000
  run "this/pending (enqueue_plain, 4 ARGV)" this-plain 3 "$TK" "htq:{q}:pending" "htq:{q}:events" "$MSG" "$ID" q 1000
  run "this/pending notrim" this-plain-notrim 3 "$TK" "htq:{q}:pending" "htq:{q}:events" "$MSG" "$ID" q 1000
  run "base/due in 1h + retention (enqueue + lib + lanelib, 14 ARGV)" base-full 8 "${K8[@]}" "" "$ID" "$MSG" "$FUT" "" 0 0 "" 3600000 htq:events q 1000 "" ""
  run "this/due in 1h + retention (enqueue_plain, 7 ARGV)" this-plain 4 "$TK" "htq:{q}:pending" "htq:{q}:events" "htq:{q}:scheduled" "$MSG" "$ID" q 1000 3600000 "" "$FUT"
  run "this/due in 1h + retention notrim" this-plain-notrim 4 "$TK" "htq:{q}:pending" "htq:{q}:events" "htq:{q}:scheduled" "$MSG" "$ID" q 1000 3600000 "" "$FUT"
done
