#!/usr/bin/env bash
# Runs every store through every test REPS times, interleaved, and appends
# the JSON lines to results-latest.jsonl (or OUT) beside this script. About
# 4 minutes per repetition on the project's 2-core machine. The run the ADR
# reports is in results/ (docs/adr/0002-embedded-store.md).
#
#   bench/storebench/run.sh
#   REPS=1 bench/storebench/run.sh
set -eu
cd "$(dirname "$0")"
OUT=${OUT:-results-latest.jsonl}
mkdir -p bin
go build -o bin/storebench .
for rep in $(seq 1 "${REPS:-3}"); do
  for s in bbolt pebble sqlite; do
    bin/storebench -store "$s" -test durable 2>/dev/null | sed "s/^{/{\"rep\":$rep,/"
    bin/storebench -store "$s" -test durable -seq 2>/dev/null | sed "s/^{/{\"rep\":$rep,/"
    bin/storebench -store "$s" -test churn -seq 2>/dev/null | sed "s/^{/{\"rep\":$rep,/"
    bin/storebench -store "$s" -test reopen -seq 2>/dev/null | sed "s/^{/{\"rep\":$rep,/"
  done
done | tee -a "$OUT"
