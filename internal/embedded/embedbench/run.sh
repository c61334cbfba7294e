#!/usr/bin/env bash
# Runs every embedbench scenario REPS times (default 3) and appends the JSON
# lines to results.jsonl beside this script. About 5 minutes per repetition
# on the project's 2-core machine.
set -eu
cd "$(dirname "$0")"
go build -o /tmp/embedbench .
for run in $(seq 1 "${REPS:-3}"); do
  for conc in 1 16 64; do
    /tmp/embedbench -run "$run" -scenario enqueue -conc "$conc" -n $((conc == 1 ? 5000 : 100000))
  done
  /tmp/embedbench -run "$run" -scenario process -conc 10
  /tmp/embedbench -run "$run" -scenario serverprocess -conc 10
  /tmp/embedbench -run "$run" -scenario serverprocess -conc 50
  /tmp/embedbench -run "$run" -scenario latency -conc 10
  /tmp/embedbench -run "$run" -scenario disk
  /tmp/embedbench -run "$run" -scenario reopen
  /tmp/embedbench -run "$run" -scenario churn
done 2>/dev/null | tee -a results.jsonl
