# Sourced by cpu-ab.sh and cpu-ab-paired.sh: builds the load tools of ../shared/bench/httpload
# into a temporary folder ($work, removed at exit with every process in $pids) and defines what
# both scripts measure with. Needs N (requests per measurement) set.
loads=$(cd "$(dirname "$0")/../../../shared/bench/httpload" 2>/dev/null && pwd) ||
  { echo "../shared/bench/httpload not found beside the project checkout" >&2; exit 1; }
work=$(mktemp -d); pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
(cd "$loads" && go build -o "$work/load" ./load && go build -o "$work/v1load" ./v1load) || exit 1
# the load tool sends HTQ's default credentials
K=sbvrgrgbg10rgye5y5ebfbgdyyhdgsrg; T=usbvbhu0srfefeafrrgy5rgrgrfrfegsrg; TOK=bench-token-0123456789
later=$(date -d '+1 hour' '+%Y-%m-%d %H:%M:%S')
cpu() { awk '{print $14+$15}' /proc/"$1"/stat; }   # clock ticks of 10 ms
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
perreq() { echo $(( ($2 - $1) * 10000 / N )); }    # µs per request

# medians label=binary...: the median of each figure of $work/lines by backend and label.
medians() {
  for backend in $BACKENDS; do
    for spec in "$@"; do
      local label=${spec%%=*} line="  $backend ${spec%%=*}:"
      for m in v1_us addtask_us refused_us hwm_kb load; do
        med=$(grep "backend=$backend label=$label " "$work/lines" | sed -n "s/.* $m=\([0-9.]*\).*/\1/p" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
        line="$line $m=$med"
      done
      echo "$line"
    done
  done
}
