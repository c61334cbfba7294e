#!/usr/bin/env bash
# What one HTTP request costs the serving process in syscalls, context switches and CPU: perf stat
# attached to the process (-p) while ../shared/bench/httpload's v1load sends N /v1 enqueues (one
# URL task due in an hour, c=32, after 2,000 of warm-up), divided by N. Each spec is label=binary
# or label=binary@backend (backend file or redis, file by default); bench/serve/floor (the bare
# net/http server) takes any backend and ignores it. The specs run by turns, REPS times, the order
# rotated every repetition; one line per run with the load average, then the medians.
#
#   bench/serve/syscounts.sh main=$D/htq@file main=$D/htq@redis floor=$D/floor
#
# REQ=refused sends HTQ's addTask with a target the guard refuses instead (../shared/bench/httpload's
# load tool; it touches no storage; every request is answered error_code 1001).
# DATA_DIR puts the embedded store there instead of a temporary folder under $TMPDIR (e.g. /dev/shm:
# a tmpfs, where fdatasync writes nothing to a disk).
# SERVE_ENV (e.g. "GOMAXPROCS=1" or "GODEBUG=…") is set for every served process. Needs perf
# with the syscalls tracepoints (root, or perf_event_paranoid ≤ -1).
#
# BURN=1 runs one busy loop per CPU under SCHED_IDLE (chrt -i 0: it runs only when nothing else
# wants the CPU) for the whole script: the CPUs never go idle, everything else runs as before.
# BURN=2 runs them at normal priority instead: a loaded machine, where htq serve and the load
# tool share the CPUs with two busy processes.
set -u
REPS=${REPS:-3}; N=${N:-20000}; SERVE_ENV=${SERVE_ENV:-}; BURN=${BURN:-0}; REQ=${REQ:-v1}; DATA_DIR=${DATA_DIR:-}
[ $# -ge 1 ] || { echo "usage: $0 label=binary[@backend] ..." >&2; exit 2; }
. "$(dirname "$0")/cpu-lib.sh"
ev=task-clock,context-switches,cpu-migrations,page-faults,raw_syscalls:sys_enter,syscalls:sys_enter_futex,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_pwrite64,syscalls:sys_enter_fdatasync,syscalls:sys_enter_nanosleep,syscalls:sys_enter_sched_yield,syscalls:sys_enter_tgkill
# ipis: the machine's rescheduling and function-call interrupts so far (every CPU, every process);
# steal: the ticks the hypervisor ran something else on this machine's virtual CPUs.
ipis() { awk '$1 == "RES:" || $1 == "CAL:" {n = 0; for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) n += $i; v[$1] = n} END {print v["RES:"] "," v["CAL:"]}' /proc/interrupts; }
steal() { awk '$1 == "cpu" {print $9}' /proc/stat; }
names=(task_clock_us cs migr faults sys futex epoll_pwait read write pwrite64 fdatasync nanosleep sched_yield tgkill)
specs=("$@")
if [ "$BURN" != 0 ]; then
  sched="chrt -i 0"; [ "$BURN" = 2 ] && sched=
  for _ in $(seq "$(nproc)"); do $sched sh -c 'while :; do :; done' & pids+=($!); done
fi
# send n: n requests of the measured kind to the process at $B
send() {
  if [ "$REQ" = refused ]; then "$work/load" -base "$B" -n "$1" -exec "$later" -target http://10.9.9.9/x
  else "$work/v1load" -base "$B" -n "$1" -token $TOK; fi
}
for rep in $(seq "$REPS"); do
  for k in $(seq 0 $(( ${#specs[@]} - 1 ))); do
    spec=${specs[$(( (k + rep) % ${#specs[@]} ))]}; label=${spec%%=*}; rest=${spec#*=}
    bin=${rest%@*}; backend=file; [ "$rest" != "$bin" ] && backend=${rest##*@}
    data=$work/data; [ -n "$DATA_DIR" ] && data=$(mktemp -d "$DATA_DIR/htq-syscounts.XXXXXX")
    startserve "$backend" "$bin" "$data" $SERVE_ENV
    send 2000 >/dev/null
    threads0=$(ls /proc/$p/task | wc -l)
    perf stat -x, -e "$ev" -p $p -o "$work/perf.txt" & perfpid=$!
    sleep 0.3   # perf attaches
    a=$(cpu $p); read u0 s0 < <(awk '{print $14, $15}' /proc/$p/stat); i0=$(ipis); st0=$(steal)
    send "$N" >"$work/v1.txt"
    b=$(cpu $p); read u1 s1 < <(awk '{print $14, $15}' /proc/$p/stat); i1=$(ipis); st1=$(steal)
    kill -INT $perfpid; wait $perfpid 2>/dev/null
    threads=$(ls /proc/$p/task | wc -l)
    load=$(cut -d' ' -f1 /proc/loadavg)
    line="label=$label backend=$backend rep=$rep cpu_us=$(perreq $a $b) user_us=$(perreq $u0 $u1) sys_us=$(perreq $s0 $s1)"
    line="$line res_ipi=$(awk -v a="${i0%,*}" -v b="${i1%,*}" -v n=$N 'BEGIN {printf "%.2f", (b - a) / n}')"
    line="$line cal_ipi=$(awk -v a="${i0#*,}" -v b="${i1#*,}" -v n=$N 'BEGIN {printf "%.2f", (b - a) / n}') steal_us=$(perreq $st0 $st1)"
    # perf -x, lines: value,unit,event,...; task-clock is in msec
    i=0
    while IFS=, read -r val unit evname _; do
      case $evname in task-clock) val=$(awk -v v="$val" 'BEGIN {print v * 1000}') ;; esac
      line="$line ${names[$i]}=$(awk -v v="$val" -v n="$N" 'BEGIN {printf "%.2f", v / n}')"; i=$((i + 1))
    done < <(grep -v '^#' "$work/perf.txt" | grep -v '^$')
    want=errors=0; [ "$REQ" = refused ] && want=errors=$N
    st=ok; grep -q "$want" "$work/v1.txt" || st="ERRORS: $(cat "$work/v1.txt" "$work/serve.log" | tr '\n' ' ')"
    echo "$line threads=$threads0/$threads req=$REQ data=${DATA_DIR:-tmp} load=$load env=${SERVE_ENV:-none} burn=$BURN $st" | tee -a "$work/lines"
    kill $p; wait $p 2>/dev/null; [ -n "$rpid" ] && { kill $rpid; wait $rpid 2>/dev/null; }
    rm -rf "$data"
  done
done
echo "medians of $REPS (per request; perf's task_clock_us includes the time perf's window adds around the load):"
for spec in "${specs[@]}"; do
  label=${spec%%=*}; rest=${spec#*=}; bin=${rest%@*}; backend=file; [ "$rest" != "$bin" ] && backend=${rest##*@}
  out="  $label@$backend:"
  for m in cpu_us user_us sys_us res_ipi cal_ipi steal_us "${names[@]}" load; do
    med=$(grep "label=$label backend=$backend " "$work/lines" | sed -n "s/.* $m=\([0-9.]*\).*/\1/p" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    out="$out $m=$med"
  done
  echo "$out"
done
