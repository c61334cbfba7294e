#!/usr/bin/env bash
# Scale-out of htq serve: 1, 2 and 4 htq serve processes on one private
# redis-server and on a private three-primary Redis Cluster, with 1 and 6
# pull queues; single typed-task enqueues from 32 keep-alive connections
# spread evenly over the processes. Per run: requests/s, CPU per request of
# the htq serve processes (summed) and of Redis (every node), Redis
# commands per request. One JSON line per run (servebench -scenario
# scaleout) to $OUT, a Markdown table of the medians at the end.
#
#   bench/serve/run-scaleout.sh                      # 3 repetitions, ~4 min on 2 cores
#   REPS=1 N=10000 bench/serve/run-scaleout.sh       # quick
#
# Environment: REPS (3), N (timed enqueues per run, 40000), PROCS ("1,2,4"),
# QUEUES ("1,6"), TOPOLOGIES ("single cluster"), OUT
# (results-latest-scaleout.jsonl). Every process is started here (by
# servebench) and stopped again; only loopback is used.
set -euo pipefail
cd "$(dirname "$0")"
REPS=${REPS:-3}
N=${N:-40000}
PROCS=${PROCS:-1,2,4}
QUEUES=${QUEUES:-1,6}
TOPOLOGIES=${TOPOLOGIES:-single cluster}
OUT=${OUT:-results-latest-scaleout.jsonl}
mkdir -p bin
(cd ../.. && go build -o bench/serve/bin/htq ./cmd/htq)
go build -o bin/servebench .
: >"$OUT"
for rep in $(seq "$REPS"); do
	for topo in $TOPOLOGIES; do
		echo "run $rep, $topo" >&2
		./bin/servebench -htq bin/htq -scenario scaleout -topology "$topo" -procs "$PROCS" -queues "$QUEUES" \
			-n-scaleout "$N" -run "$rep" -label "${LABEL:-}" "$@" | tee -a "$OUT"
	done
done
./bin/servebench -summarize "$OUT"
