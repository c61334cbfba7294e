#!/usr/bin/env bash
# Runs examples/hello against HTQ_STORAGE, or against a private
# redis-server on a free loopback port that it starts and stops.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${HTQ_STORAGE:-}" ]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 6399)
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no --loglevel warning &
  pid=$!
  trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  export HTQ_STORAGE="redis://127.0.0.1:$port/0"
fi
go run ./examples/hello
