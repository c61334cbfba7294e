#!/usr/bin/env bash
# A/B of htq serve's CPU per HTTP request, the two builds measured AT THE SAME TIME: the requests
# of cpu-ab.sh (../shared/bench/httpload's net/http load tools, c=32, tasks due in an hour; /v1,
# HTQ's addTask, an addTask refused at once), sent to two htq serve processes side by side, each on
# its own storage (its own redis-server, or its own embedded store), so that both see the same load
# from the rest of the machine. On a machine shared with other work, whose load swings the CPU per
# request of one build by ±30 % from one run to the next (cpu-ab.sh's sequential runs), the ratio
# within a pair is the figure to read. Prints one line per build and pair (with the process's peak
# resident memory, hwm_kb, after its 66,000 requests), and the medians.
#
#   bench/serve/cpu-ab-paired.sh before=$D/htq-before after=$D/htq-after
#
# REPS (5) pairs per backend, N (20000) requests per measurement, BACKENDS ("file redis"). The two
# builds swap sides (which starts first, whose output is read first) every repetition.
set -u
REPS=${REPS:-5}; N=${N:-20000}; BACKENDS=${BACKENDS:-"file redis"}
[ $# -eq 2 ] || { echo "usage: $0 labelA=binary labelB=binary" >&2; exit 2; }
. "$(dirname "$0")/cpu-lib.sh"
# start i backend label=binary: starts the storage and htq serve of side i (0 or 1).
declare -A B P R L
start() {
  local i=$1 backend=$2 spec=$3 broker rp hp
  L[$i]=${spec%%=*}; local bin=${spec#*=}
  rm -rf "$work/data$i"; broker="file:$work/data$i"; R[$i]=
  if [ "$backend" = redis ]; then
    rp=$(freeport)
    redis-server --port $rp --bind 127.0.0.1 --save "" --appendonly no >/dev/null 2>&1 & R[$i]=$!; pids+=(${R[$i]})
    for _ in $(seq 50); do redis-cli -p $rp ping >/dev/null 2>&1 && break; sleep 0.1; done
    broker="redis://127.0.0.1:$rp/0"
  fi
  hp=$(freeport); B[$i]=http://127.0.0.1:$hp
  HTQ_ADDR=127.0.0.1:$hp HTQ_STORAGE=$broker HTQ_TOKEN=$TOK HTQ_APP_KEY=$K HTQ_APP_TOKEN=$T \
    HTQ_ALLOW_TARGETS=127.0.0.0/8 HTQ_LOG_LEVEL=error TZ=UTC "$bin" serve >"$work/serve$i.log" 2>&1 & P[$i]=$!; pids+=(${P[$i]})
  for _ in $(seq 100); do curl -sf "${B[$i]}/healthz" >/dev/null && break; sleep 0.1; done
  curl -s -H "Authorization: Bearer $TOK" -H 'Content-Type: application/json' \
    -d '{"name":"v1q","mode":"real_time","max_concurrency":100}' "${B[$i]}/v1/queues" >/dev/null
  curl -s "${B[$i]}/api/addQueue" -F app_key=$K -F app_token=$T -F queue_name=loadq -F type=real_time >/dev/null
}
# both cmd...: runs the load tool on both sides at once ({B} stands for the side's base URL) and
# prints each side's CPU ticks over it; the tools' outputs go to $work/out0 and out1.
both() {
  local a0 a1 b0 b1
  a0=$(cpu ${P[0]}); a1=$(cpu ${P[1]})
  "${@//\{B\}/${B[0]}}" >"$work/out0" & local j0=$!
  "${@//\{B\}/${B[1]}}" >"$work/out1" & local j1=$!
  wait $j0; b0=$(cpu ${P[0]}); wait $j1; b1=$(cpu ${P[1]})
  echo "$(perreq $a0 $b0) $(perreq $a1 $b1)"
}
for rep in $(seq "$REPS"); do
  for backend in $BACKENDS; do
    if [ $((rep % 2)) = 1 ]; then start 0 "$backend" "$1"; start 1 "$backend" "$2"; else start 0 "$backend" "$2"; start 1 "$backend" "$1"; fi
    both "$work/v1load" -base {B} -n 2000 -token $TOK >/dev/null
    read v0 v1 < <(both "$work/v1load" -base {B} -n "$N" -token $TOK); ok0=$(grep -c "errors=0" "$work/out0"); ok1=$(grep -c "errors=0" "$work/out1")
    cat "$work/out0" >"$work/err0"; cat "$work/out1" >"$work/err1"
    both "$work/load" -base {B} -n 2000 -exec "$later" -target http://127.0.0.1:1/x >/dev/null
    read h0 h1 < <(both "$work/load" -base {B} -n "$N" -exec "$later" -target http://127.0.0.1:1/x); ok0=$ok0$(grep -c "errors=0" "$work/out0"); ok1=$ok1$(grep -c "errors=0" "$work/out1")
    cat "$work/out0" >>"$work/err0"; cat "$work/out1" >>"$work/err1"
    # 10.0.0.0/8 is private and not allowed: every request is refused (all count as errors)
    read f0 f1 < <(both "$work/load" -base {B} -n "$N" -exec "$later" -target http://10.9.9.9/x); ok0=$ok0$(grep -c "errors=$N" "$work/out0"); ok1=$ok1$(grep -c "errors=$N" "$work/out1")
    cat "$work/out0" >>"$work/err0"; cat "$work/out1" >>"$work/err1"
    load=$(cut -d' ' -f1 /proc/loadavg)
    for i in 0 1; do
      v=v$i h=h$i f=f$i okv=ok$i; st=ok; [ "${!okv}" = 111 ] || st="ERRORS (v1, addTask, refused as expected: ${!okv}): $(cat "$work/err$i" "$work/serve$i.log" | tr '\n' ' ')"
      hwm=$(awk '/^VmHWM:/ {print $2}' /proc/${P[$i]}/status)   # the process's peak resident memory, kB
      echo "rep=$rep backend=$backend label=${L[$i]} v1_us=${!v} addtask_us=${!h} refused_us=${!f} hwm_kb=$hwm load=$load $st" | tee -a "$work/lines"
    done
    for i in 0 1; do kill ${P[$i]}; wait ${P[$i]} 2>/dev/null; [ -n "${R[$i]}" ] && { kill ${R[$i]}; wait ${R[$i]} 2>/dev/null; }; done
  done
done
echo "medians of $REPS (µs of htq serve CPU per request; the two builds measured at the same time):"
medians "$1" "$2"
