#!/usr/bin/env bash
# Runs every store through every test REPS times, interleaved, and appends
# the JSON lines to results.jsonl. About 4 minutes per repetition here.
set -eu
cd "$(dirname "$0")"
go build -o /tmp/storebench .
for rep in $(seq 1 "${REPS:-3}"); do
  for s in bbolt pebble sqlite; do
    /tmp/storebench -store "$s" -test durable 2>/dev/null | sed "s/^{/{\"rep\":$rep,/"
    /tmp/storebench -store "$s" -test durable -seq 2>/dev/null | sed "s/^{/{\"rep\":$rep,/"
    /tmp/storebench -store "$s" -test churn -seq 2>/dev/null | sed "s/^{/{\"rep\":$rep,/"
    /tmp/storebench -store "$s" -test reopen -seq 2>/dev/null | sed "s/^{/{\"rep\":$rep,/"
  done
done | tee -a results.jsonl
