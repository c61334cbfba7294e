#!/usr/bin/env bash
# Runs every embedbench scenario REPS times (default 3) and appends the JSON
# lines to results-latest.jsonl (or OUT) beside this script. About 5 minutes
# per repetition on the project's 2-core machine. The runs the docs report
# are in results/.
#
#   bench/embedded/run.sh
#   REPS=1 bench/embedded/run.sh
set -eu
cd "$(dirname "$0")"
OUT=${OUT:-results-latest.jsonl}
mkdir -p bin
go build -o bin/embedbench .
for run in $(seq 1 "${REPS:-3}"); do
  for conc in 1 16 64; do
    bin/embedbench -run "$run" -scenario enqueue -conc "$conc" -n $((conc == 1 ? 5000 : 100000))
  done
  bin/embedbench -run "$run" -scenario process -conc 10
  bin/embedbench -run "$run" -scenario serverprocess -conc 10
  bin/embedbench -run "$run" -scenario serverprocess -conc 50
  bin/embedbench -run "$run" -scenario latency -conc 10
  bin/embedbench -run "$run" -scenario disk
  bin/embedbench -run "$run" -scenario reopen
  bin/embedbench -run "$run" -scenario churn
done 2>/dev/null | tee -a "$OUT"
