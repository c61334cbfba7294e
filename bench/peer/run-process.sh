#!/usr/bin/env bash
# Measures processing only (the process scenario: no-op handler, 100-byte
# payloads, N preloaded tasks) of asynq, this checkout's htq and, when BASE
# names another htq tree, that tree's htq, at Concurrency 10 and 50, one
# after the other in every repetition against the same private
# redis-server: the ratios to asynq and the per-task costs of both htq
# builds come from one run. One JSON line per run (label "peer" for asynq,
# "this", "base") to $OUT, with a loadavg line before the first and after
# every repetition.
#
#   BASE=/path/to/main REPS=3 bench/peer/run-process.sh     # ~3 min on 2 cores
#
# Environment: BASE (optional), PORT (default 6396; refused when taken),
# REPS (3), N (50000), CONCS ("10 50"), PAYLOAD (100 bytes a task),
# OUT (results-latest-process.jsonl).
set -euo pipefail
cd "$(dirname "$0")"
PORT=${PORT:-6396}
REPS=${REPS:-3}
N=${N:-50000}
CONCS=${CONCS:-10 50}
PAYLOAD=${PAYLOAD:-100}
OUT=${OUT:-results-latest-process.jsonl}
GO=${GO:-go}
ADDR=127.0.0.1:$PORT

log() { printf '[run-process %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# shellcheck source=ab-setup.sh
. ./ab-setup.sh

load() { printf '{"scenario":"loadavg","loadavg":"%s","time":"%s"}\n' "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u +%FT%TZ)" >>"$OUT"; }
: >"$OUT"
load
for rep in $(seq "$REPS"); do
	for c in $CONCS; do
		L=(-addr "$ADDR" -run "$rep" -scenario process -n "$N" -conc "$c" -payload "$PAYLOAD")
		./bin/peerbench "${L[@]}" -impl asynq -label peer 2>/dev/null >>"$OUT"
		./bin/peerbench "${L[@]}" -impl htq -label this 2>/dev/null >>"$OUT"
		if [ -n "${BASE:-}" ]; then
			./bin/peerbench-base "${L[@]}" -impl htq -label base 2>/dev/null >>"$OUT"
		fi
	done
	load
done
python3 - "$OUT" <<'PY'
import json, sys, statistics
rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["scenario"] == "process":
        rows.setdefault((r["conc"], r["label"]), []).append(r)
print("| concurrency | build | tasks/s | × asynq (per repetition) | Redis CPU µs/task | client CPU µs/task | Redis calls/task | scripts/task |")
print("|---|---|---:|---|---:|---:|---:|---:|")
for (c, label), rs in sorted(rows.items()):
    m = lambda f: statistics.median(f(x) for x in rs)
    peer = {x["run"]: x["tasks_per_s"] for x in rows.get((c, "peer"), [])}
    ratios = "–" if label == "peer" else ", ".join(f"{x['tasks_per_s'] / peer[x['run']]:.2f}" for x in rs if x["run"] in peer)
    print(f"| {c} | {label} | {m(lambda x: x['tasks_per_s']):,.0f} | {ratios} | "
          f"{m(lambda x: x['redis_cpu_s'] * 1e6 / x['processed']):.1f} | {m(lambda x: x['bench_cpu_s'] * 1e6 / x['processed']):.1f} | "
          f"{m(lambda x: x['redis_calls_per_task']):.2f} | {m(lambda x: x['redis_scripts_per_task']):.3f} |")
PY
