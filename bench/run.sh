#!/usr/bin/env bash
# The one command that measures htq and asynq side by side in the same run,
# against the same private redis-server, with the same harness (bench/peer).
# Writes bench/peer/results-peer.jsonl and bench/peer/summary-peer.md; see
# docs/performance.md for the last reported run.
#
#   bench/run.sh                              # full suite, 3 repetitions (~7 min)
#   REPS=1 VARIANTS=0 AOF=0 bench/run.sh      # quick run
#
# Every variable of bench/peer/run-peer.sh applies (PORT, REPS, AOF, ...);
# IMPLS defaults to "asynq htq htq-file" here (htq-file: the embedded store).
set -euo pipefail
cd "$(dirname "$0")/peer"
IMPLS=${IMPLS:-"asynq htq htq-file"} exec ./run-peer.sh "$@"
