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

# startserve backend binary datadir [VAR=value...]: starts a private redis-server (backend redis) or
# uses an embedded store in datadir (backend file; emptied first), then binary serve on a free port
# with the variables given, waits for it, and creates the queues the load tools send to. Sets p (its
# PID), rpid (redis-server's, or empty), B (its base URL); both PIDs go to $pids.
startserve() {
  local backend=$1 bin=$2 data=$3 broker rp hp; shift 3
  rm -rf "$data"; broker="file:$data"; rpid=
  if [ "$backend" = redis ]; then
    rp=$(freeport)
    redis-server --port $rp --bind 127.0.0.1 --save "" --appendonly no >/dev/null 2>&1 & rpid=$!; pids+=($rpid)
    for _ in $(seq 50); do redis-cli -p $rp ping >/dev/null 2>&1 && break; sleep 0.1; done
    broker="redis://127.0.0.1:$rp/0"
  fi
  hp=$(freeport); B=http://127.0.0.1:$hp
  env "$@" HTQ_ADDR=127.0.0.1:$hp HTQ_STORAGE=$broker HTQ_TOKEN=$TOK HTQ_APP_KEY=$K HTQ_APP_TOKEN=$T \
    HTQ_ALLOW_TARGETS=127.0.0.0/8 HTQ_LOG_LEVEL=error TZ=UTC "$bin" serve >"$work/serve.log" 2>&1 & p=$!; pids+=($p)
  for _ in $(seq 100); do curl -sf "$B/healthz" >/dev/null && break; sleep 0.1; done
  curl -s -H "Authorization: Bearer $TOK" -H 'Content-Type: application/json' \
    -d '{"name":"v1q","mode":"real_time","max_concurrency":100}' "$B/v1/queues" >/dev/null
  curl -s "$B/api/addQueue" -F app_key=$K -F app_token=$T -F queue_name=loadq -F type=real_time >/dev/null
}

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
