#!/usr/bin/env bash
# Stop the moto_server started by start-moto.sh (its process group only).
B=${MOTO_BASE:-/tmp/tx-moto}
if [ -f "$B/moto.pid" ]; then
  p=$(cat "$B/moto.pid"); kill -TERM -- "-$p" 2>/dev/null || true
  for _ in $(seq 20); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
  kill -KILL -- "-$p" 2>/dev/null || true; rm -f "$B/moto.pid"
fi
echo "[stop-moto] stopped" >&2
