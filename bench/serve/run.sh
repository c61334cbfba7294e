#!/usr/bin/env bash
# Measures htq serve: enqueue through the HTTP API (single tasks on 32
# keep-alive connections, and batches of 1,000) and URL dispatch at
# concurrency 100 to a local target, REPS times against each backend.
# Every process is started here and stopped again; only loopback is used.
#
#   bench/serve/run.sh                   # 3 repetitions x (redis, file), ~5 min
#   REPS=1 BACKENDS=file bench/serve/run.sh
#
# JSON lines go to bench/serve/results-latest.jsonl (or OUT); the medians
# are printed as a Markdown table at the end.
set -euo pipefail
cd "$(dirname "$0")"
REPS=${REPS:-3}
BACKENDS=${BACKENDS:-"redis file"}
OUT=${OUT:-results-latest.jsonl}
mkdir -p bin
(cd ../.. && go build -o bench/serve/bin/htq ./cmd/htq)
go build -o bin/servebench .
: > "$OUT"
for rep in $(seq "$REPS"); do
  for backend in $BACKENDS; do
    echo "run $rep, $backend" >&2
    ./bin/servebench -htq bin/htq -backend "$backend" -run "$rep" -label "${LABEL:-}" -serve-log serve.log "$@" | tee -a "$OUT"
  done
done
./bin/servebench -summarize "$OUT"
