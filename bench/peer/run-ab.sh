#!/usr/bin/env bash
# Measures this checkout's htq against another checkout's (BASE: a
# directory holding another htq tree, e.g. the main branch's) with the
# same harness, in the same run, against the same private redis-server:
# the plain enqueue and process scenarios, each repetition running BASE's
# build and this one's back to back (alternating which goes first), so
# that both see the same machine load. A change that must cost nothing on
# the plain paths shows it here. Then, when FAIR=1, the fair scenario
# (fair sharing by key, this build only) with and without keys. MEM=1
# adds the memory scenario (Redis bytes per pending task) to each build's
# runs.
#
#   BASE=/path/to/main REPS=5 bench/peer/run-ab.sh
#
# Environment: BASE (required), PORT (default 6394; refused when taken),
# REPS (default 5), IMPLS (default "htq htq-file"), FAIR (default 1),
# MEM (default 0), SCENARIOS (default "all"; "enqueue": the single
# enqueues from 1 and 16 goroutines only),
# OUT (default results-ab.jsonl). JSON lines carry label "base" or "this";
# the summary (bin/summarize -base-label base) goes to stderr and
# summary-ab.md.
set -euo pipefail
cd "$(dirname "$0")"

BASE=${BASE:?set BASE to the directory of the htq tree to compare with}
PORT=${PORT:-6394}
REPS=${REPS:-5}
IMPLS=${IMPLS:-"htq htq-file"}
FAIR=${FAIR:-1}
MEM=${MEM:-0}
SCENARIOS=${SCENARIOS:-all}
OUT=${OUT:-results-ab.jsonl}
SUMMARY=${SUMMARY:-summary-ab.md}
GO=${GO:-go}
ADDR=127.0.0.1:$PORT

log() { printf '[run-ab %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# shellcheck source=ab-setup.sh
. ./ab-setup.sh
"$GO" build -o bin/summarize ./cmd/summarize

: >"$OUT"
load() { printf '{"scenario":"loadavg","loadavg":"%s","time":"%s"}\n' "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u +%FT%TZ)" | tee -a "$OUT"; }
plain() { # $1 = binary, $2 = label, $3 = impl, $4 = rep
  local L=(-addr "$ADDR" -impl "$3" -label "$2" -run "$4")
  "$1" -scenario enqueue -n 50000 -conc 1 "${L[@]}"
  "$1" -scenario enqueue -n 50000 -conc 16 "${L[@]}"
  [ "$SCENARIOS" = enqueue ] && return
  "$1" -scenario enqueue-batch -n 50000 -batch 1000 -conc 1 "${L[@]}"
  "$1" -scenario process -n 50000 -conc 10 "${L[@]}"
  "$1" -scenario process -n 50000 -conc 50 "${L[@]}"
  if [ "$MEM" = 1 ] && [ "$3" != htq-file ]; then
    "$1" -scenario memory -n 100000 "${L[@]}"
  fi
}
T0=$(date +%s)
load
for rep in $(seq "$REPS"); do
  for impl in $IMPLS; do
    if [ $((rep % 2)) = 1 ]; then order="base this"; else order="this base"; fi
    for which in $order; do
      log "rep $rep/$REPS $impl $which"
      bin=./bin/peerbench; [ "$which" = base ] && bin=./bin/peerbench-base
      plain "$bin" "$which" "$impl" "$rep" 2>/dev/null | tee -a "$OUT"
    done
  done
  load
done
if [ "$FAIR" = 1 ]; then
  for rep in $(seq "$REPS"); do
    for impl in $IMPLS; do
      log "rep $rep/$REPS $impl fair"
      ./bin/peerbench -addr "$ADDR" -impl "$impl" -label this -run "$rep" -scenario fair -n 100000 -small 100 -conc 10 2>/dev/null | tee -a "$OUT"
      ./bin/peerbench -addr "$ADDR" -impl "$impl" -label this -run "$rep" -scenario fair -n 100000 -small 100 -conc 10 -fair-keys=false 2>/dev/null | tee -a "$OUT"
    done
  done
  load
fi
log "took $(( $(date +%s) - T0 )) s"
./bin/summarize -ref htq -base-label base "$OUT" | tee "$SUMMARY" >&2
