#!/usr/bin/env bash
# Scale-out of htq's workers: 1, 2 and 4 worker processes (concurrency 50
# each) on one private redis-server and on a private three-primary Redis
# Cluster, with 1 and 6 queues; per run, tasks/s, Redis CPU per task (every
# node), worker CPU per task and Redis commands per task. One JSON line per
# run (peerbench -scenario scaleout) to $OUT, a Markdown table of the
# medians to stdout.
#
#   ./run-scaleout.sh                 # 3 repetitions, ~4 minutes on 2 cores
#   REPS=1 N=20000 ./run-scaleout.sh  # quick
#
# Environment: PORT (single server, default 6395), CPORT (first cluster
# port, default 7391; it uses three), REPS (3), N (tasks per run, 100000),
# PROCS ("1 2 4"), QUEUES ("1 6"), OUT (results-latest-scaleout.jsonl).
set -euo pipefail
cd "$(dirname "$0")"
PORT=${PORT:-6395}
CPORT=${CPORT:-7391}
REPS=${REPS:-3}
N=${N:-100000}
PROCS=${PROCS:-1 2 4}
QUEUES=${QUEUES:-1 6}
OUT=${OUT:-results-latest-scaleout.jsonl}
GO=${GO:-go}

dir=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

start_redis() { # port extra-args...
	local port=$1; shift
	if redis-cli -p "$port" ping >/dev/null 2>&1; then
		echo "something already listens on $port" >&2; exit 1
	fi
	mkdir -p "$dir/$port"
	redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir/$port" \
		--daemonize no --loglevel warning "$@" >/dev/null 2>&1 &
	pids+=($!)
	for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.1; done
	echo "redis-server on $port did not start" >&2; exit 1
}

$GO build -o bin/peerbench ./cmd/peerbench
start_redis "$PORT"
cports=("$CPORT" $((CPORT + 1)) $((CPORT + 2)))
for p in "${cports[@]}"; do start_redis "$p" --cluster-enabled yes --cluster-config-file "$dir/nodes-$p.conf"; done
redis-cli --cluster create $(printf '127.0.0.1:%s ' "${cports[@]}") --cluster-replicas 0 --cluster-yes >/dev/null
for _ in $(seq 100); do
	[ "$(redis-cli -p "$CPORT" cluster info | tr -d '\r' | grep cluster_state)" = "cluster_state:ok" ] && break
	sleep 0.1
done

queues_of() { # count
	local q=bench
	[ "$1" -gt 1 ] && q=$(seq -s, -f 'bench%g' 0 $(($1 - 1)))
	echo "$q"
}

: >"$OUT"
for rep in $(seq "$REPS"); do
	for q in $QUEUES; do
		for p in $PROCS; do
			./bin/peerbench -impl htq -scenario scaleout -addr "127.0.0.1:$PORT" -n "$N" -procs "$p" \
				-conc 50 -queue "$(queues_of "$q")" -label single -run "$rep" 2>/dev/null >>"$OUT"
			./bin/peerbench -impl htq -scenario scaleout -addr "127.0.0.1:$CPORT" -impl-opt cluster=true \
				-stat-addrs "$(printf '127.0.0.1:%s,' "${cports[@]}")" -n "$N" -procs "$p" \
				-conc 50 -queue "$(queues_of "$q")" -label cluster -run "$rep" 2>/dev/null >>"$OUT"
		done
	done
done
python3 - "$OUT" <<'PY'
import json, sys, statistics
rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    rows.setdefault((r["label"], r["queues"], r["procs"]), []).append(r)
print("| Redis | queues | worker processes | tasks/s | Redis CPU µs/task | worker CPU µs/task | Redis calls/task | scripts/task |")
print("|---|---|---|---|---|---|---|---|")
for (label, q, p), rs in sorted(rows.items()):
    m = lambda k: statistics.median(x[k] for x in rs)
    print(f"| {label} | {q} | {p} | {m('tasks_per_s'):,.0f} | {m('redis_cpu_us_per_task'):.1f} | {m('worker_cpu_us_per_task'):.1f} | {m('redis_calls_per_task'):.2f} | {m('redis_scripts_per_task'):.3f} |")
PY
