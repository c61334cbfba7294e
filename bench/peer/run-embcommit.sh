#!/usr/bin/env bash
# Measures the embedded store's durable enqueue (issue 12, point 5) of this
# checkout against another checkout's (BASE) in the same run: htq-file
# enqueue from 16 goroutines (and from 1), each repetition running BASE's
# build and this one's back to back, alternating which goes first, so that
# both see the same machine load. Then one run of each under
# `strace -f -c` for the fdatasync, fsync and pwrite64 calls per task
# (strace slows the run: its tasks/s are not the figure).
#
#   BASE=/path/to/main REPS=5 bench/peer/run-embcommit.sh
#
# Environment: BASE (required), PORT (default 6395; refused when taken:
# peerbench pings a Redis even for htq-file), REPS (default 5), N (tasks per
# 16-goroutine run, default 100000), STRACE (default 1), OUT (default
# results-embcommit.jsonl). JSON lines carry label "base" or "this", plus
# {"scenario":"loadavg"} lines and {"scenario":"strace"} lines holding the
# syscall counts per task.
set -euo pipefail
cd "$(dirname "$0")"

BASE=${BASE:?set BASE to the directory of the htq tree to compare with}
PORT=${PORT:-6395}
REPS=${REPS:-5}
N=${N:-100000}
STRACE=${STRACE:-1}
OUT=${OUT:-results-embcommit.jsonl}
GO=${GO:-go}
ADDR=127.0.0.1:$PORT

log() { printf '[run-embcommit %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# shellcheck source=ab-setup.sh
. ./ab-setup.sh

: >"$OUT"
load() { printf '{"scenario":"loadavg","loadavg":"%s","time":"%s"}\n' "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u +%FT%TZ)" | tee -a "$OUT"; }
runs() { # $1 = binary, $2 = label, $3 = rep
  local L=(-addr "$ADDR" -impl htq-file -label "$2" -run "$3")
  "$1" -scenario enqueue -n "$N" -conc 16 "${L[@]}"
  "$1" -scenario enqueue -n 5000 -conc 1 "${L[@]}"
}
T0=$(date +%s)
load
for rep in $(seq "$REPS"); do
  if [ $((rep % 2)) = 1 ]; then order="base this"; else order="this base"; fi
  for which in $order; do
    log "rep $rep/$REPS $which"
    bin=./bin/peerbench; [ "$which" = base ] && bin=./bin/peerbench-base
    runs "$bin" "$which" "$rep" 2>/dev/null | tee -a "$OUT"
  done
  load
done
if [ "$STRACE" = 1 ]; then
  for which in base this; do
    bin=./bin/peerbench; [ "$which" = base ] && bin=./bin/peerbench-base
    log "strace $which"
    strace -f -c --seccomp-bpf -e trace=fdatasync,fsync,pwrite64 -o "$DATA/strace.txt" \
      "$bin" -addr "$ADDR" -impl htq-file -label "$which" -scenario enqueue -n "$N" -conc 16 >/dev/null 2>&1
    awk -v which="$which" -v n="$N" '
      $NF ~ /^(fdatasync|fsync|pwrite64)$/ { calls[$NF] = $4 }
      END { printf "{\"scenario\":\"strace\",\"label\":\"%s\",\"n\":%d", which, n
            for (c in calls) printf ",\"%s_per_task\":%.4f", c, calls[c] / n
            print "}" }' "$DATA/strace.txt" | tee -a "$OUT"
  done
fi
log "took $(( $(date +%s) - T0 )) s"
# Medians by build and goroutines: tasks/s, CPU µs and bytes written per task.
jq -rs '
  def med: sort | if length % 2 == 1 then .[length/2|floor] else (.[length/2-1] + .[length/2]) / 2 end;
  [.[] | select(.scenario == "enqueue")] | group_by([.conc, .label])[] |
  "conc \(.[0].conc) \(.[0].label): runs \(length), tasks/s \([.[].tasks_per_s] | med | round), " +
  "CPU µs/task \([.[] | .bench_cpu_s * 1e6 / .n] | med * 10 | round / 10), " +
  "bytes written/task \([.[] | .bench_write_bytes / .n] | med | round), p50 ms \([.[].call_p50_ms] | med)"
' "$OUT" >&2
