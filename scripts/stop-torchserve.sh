#!/usr/bin/env bash
# Stop the TorchServe started by start-torchserve.sh (its process group only: the Java
# frontend and its Python workers). PURGE=1 also deletes its directory (models, logs).
B=${TORCHSERVE_BASE:-/tmp/tx-torchserve}
if [ -f "$B/torchserve.pid" ]; then
  p=$(cat "$B/torchserve.pid"); kill -TERM -- "-$p" 2>/dev/null || true
  for _ in $(seq 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
  kill -KILL -- "-$p" 2>/dev/null || true; rm -f "$B/torchserve.pid"
fi
[ "${PURGE:-0}" = 1 ] && rm -rf "$B"
echo "[stop-torchserve] stopped" >&2
