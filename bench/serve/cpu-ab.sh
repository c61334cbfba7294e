#!/usr/bin/env bash
# A/B of htq serve's CPU per HTTP request: the measurement of
# ../shared/bench/httpload/cpu-per-request.sh (user+system CPU of the htq serve process divided by
# requests; the shared load tools, net/http clients at c=32; tasks due in an hour so nothing
# dispatches) for several htq binaries, alternating within each repetition (the order rotated
# every repetition), plus a request refused at once (HTQ's addTask with a target the guard refuses,
# which touches no storage). Prints one line per run and the medians.
#
#   bench/serve/cpu-ab.sh before=$D/htq-before after=$D/htq-after
#
# Run it in the project checkout (it finds the load tools in ../shared/bench/httpload). REPS (3)
# repetitions, N (20000) requests per measurement, BACKENDS ("file redis").
set -u
REPS=${REPS:-3}; N=${N:-20000}; BACKENDS=${BACKENDS:-"file redis"}
[ $# -ge 1 ] || { echo "usage: $0 label=binary ..." >&2; exit 2; }
. "$(dirname "$0")/cpu-lib.sh"
labels=("$@")
for rep in $(seq "$REPS"); do
  for backend in $BACKENDS; do
    for k in $(seq 0 $(( ${#labels[@]} - 1 ))); do
      spec=${labels[$(( (k + rep) % ${#labels[@]} ))]}; label=${spec%%=*}; bin=${spec#*=}
      startserve "$backend" "$bin" "$work/data"
      "$work/v1load" -base "$B" -n 2000 -token $TOK >/dev/null
      a=$(cpu $p); "$work/v1load" -base "$B" -n "$N" -token $TOK >"$work/v1.txt"; b=$(cpu $p)
      "$work/load" -base "$B" -n 2000 -exec "$later" -target http://127.0.0.1:1/x >/dev/null
      c=$(cpu $p); "$work/load" -base "$B" -n "$N" -exec "$later" -target http://127.0.0.1:1/x >"$work/htq.txt"; d=$(cpu $p)
      # 10.0.0.0/8 is private and not allowed: every request is refused (all count as errors)
      e=$(cpu $p); "$work/load" -base "$B" -n "$N" -exec "$later" -target http://10.9.9.9/x >"$work/ref.txt"; f=$(cpu $p)
      ok=ok; grep -q "errors=0" "$work/v1.txt" && grep -q "errors=0" "$work/htq.txt" && grep -q "errors=$N" "$work/ref.txt" || ok="ERRORS: $(cat "$work"/v1.txt "$work"/htq.txt "$work"/ref.txt "$work"/serve.log | tr "\n" " ")"
      echo "rep=$rep backend=${backend} label=$label v1_us=$(perreq $a $b) addtask_us=$(perreq $c $d) refused_us=$(perreq $e $f) load=$(cut -d' ' -f1 /proc/loadavg) $ok" | tee -a "$work/lines"
      kill $p; wait $p 2>/dev/null
      [ -n "$rpid" ] && { kill $rpid; wait $rpid 2>/dev/null; }
    done
  done
done
echo "medians of $REPS (µs of htq serve CPU per request):"
medians "${labels[@]}"
