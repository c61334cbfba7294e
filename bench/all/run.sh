#!/usr/bin/env bash
# `make bench`: every peer comparison of issue 12 in one run, and one table
# of ratios measured in that run (bench/README.md, "make bench"; how to read
# it: docs/performance.md).
#
#   make bench            # full: 3 repetitions (about 26 minutes on 2 cores at load 20)
#   QUICK=1 make bench    # 1 repetition, smaller runs (about 7 minutes at load 20)
#
# Each repetition runs, one after the other:
#   1. bench/peer/run-peer.sh with IMPLS="asynq htq htq-file": asynq and htq on
#      the same private redis-server, htq on its embedded store;
#   2. bench/river: River v0.51.2 on SQLite (durable), the embedded store's peer;
#   3. bench/serve -scenario request-cpu, by turns: the net/http floor
#      (bench/serve/floor, no storage), htq serve on the embedded store, htq
#      serve on a private redis-server: CPU per HTTP request, htq serve's
#      beside the floor's of the same minutes.
# Then bench/all (command benchtable) prints the table and writes it to
# bench/results/make-bench-latest.{md,jsonl}, the raw lines of every program
# to bench/results/make-bench-latest-raw.jsonl (all three ignored by git:
# copy a run you report to a dated name).
#
# Needs Go and redis-server, redis-cli, redis-benchmark on PATH (`make deps`
# installs them); the first run downloads asynq, River and SQLite through the
# Go module proxy. Environment: QUICK, REPS, GO, and N_PEER, N_RIVER,
# N_HTTP (tasks or requests per measurement).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
  REPS=${REPS:-1}; N_PEER=${N_PEER:-20000}; N_RIVER=${N_RIVER:-5000}; N_HTTP=${N_HTTP:-10000}; mode=QUICK
else
  REPS=${REPS:-3}; N_PEER=${N_PEER:-50000}; N_RIVER=${N_RIVER:-20000}; N_HTTP=${N_HTTP:-20000}; mode=full
fi
GO=${GO:-$(command -v go || true)}
log() { printf '[make bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

[ -n "$GO" ] || { log "no go on PATH: put Go on PATH or set GO=path/to/go"; exit 1; }
for tool in redis-server redis-cli redis-benchmark; do
  command -v "$tool" >/dev/null || { log "missing $tool on PATH (make deps installs it)"; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
results=$root/bench/results
mkdir -p "$results"
loadstart=$(cut -d' ' -f1-3 /proc/loadavg)
T0=$(date +%s)

log "building htq, servebench, floor, riverbench, benchtable"
(cd "$root" && "$GO" build -o "$work/htq" ./cmd/htq)
(cd "$root/bench/serve" && "$GO" build -o "$work/servebench" .)
(cd "$root/bench/serve" && "$GO" build -o "$work/floor" ./floor)
(cd "$root/bench/river" && "$GO" build -o "$work/riverbench" .)
(cd "$root/bench/all" && "$GO" build -o "$work/benchtable" .)

for rep in $(seq "$REPS"); do
  log "repetition $rep/$REPS: asynq, htq and htq-file on bench/peer (its log: bench/peer/make-bench.log)"
  REPS=1 VARIANTS=0 AOF=0 N=$N_PEER IMPLS="asynq htq htq-file" GO=$GO \
    OUT="$work/peer-$rep.jsonl" SUMMARY="$work/peer-$rep.md" \
    "$root/bench/peer/run-peer.sh" >/dev/null 2>"$root/bench/peer/make-bench.log" ||
    { log "bench/peer failed:"; tail -20 "$root/bench/peer/make-bench.log" >&2; exit 1; }
  sed -i "s/\"run\":1,/\"run\":$rep,/" "$work/peer-$rep.jsonl"

  log "repetition $rep/$REPS: River on SQLite"
  river() { "$work/riverbench" -rep "$rep" "$@" >>"$work/river.jsonl"; }
  river -scenario enqueue -variant seq -n "$N_RIVER"
  river -scenario enqueue -variant conc -g 16 -n "$N_RIVER"
  river -scenario enqueue -variant many -batch 1000 -n "$N_PEER"
  river -scenario process -workers 10 -n "$N_RIVER" -cap 60s
  river -scenario process -workers 50 -n "$N_RIVER" -cap 60s

  # the floor first, then htq serve on each backend: all three within a
  # minute or two, so that the table's htq / floor compares the same minutes
  for backend in floor file redis; do
    log "repetition $rep/$REPS: CPU per request ($backend)"
    "$work/servebench" -htq "$work/htq" -floor "$work/floor" -backend "$backend" -scenario request-cpu \
      -n-request-cpu "$N_HTTP" -run "$rep" -label "make-bench $mode" >>"$work/serve.jsonl"
  done
done

log "took $(( $(date +%s) - T0 )) s"
cat "$work"/peer-*.jsonl "$work/river.jsonl" "$work/serve.jsonl" >"$results/make-bench-latest-raw.jsonl"
"$work/benchtable" -note "$mode, $REPS repetition(s), $(nproc) CPUs, $(( $(date +%s) - T0 )) s" \
  -loadavg-start "$loadstart" -out "$results/make-bench-latest.jsonl" -md "$results/make-bench-latest.md" \
  "$results/make-bench-latest-raw.jsonl"
