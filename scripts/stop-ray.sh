#!/usr/bin/env bash
# Stop the Ray head started by start-ray.sh: its process group and the processes that name
# its temp dir (Ray's raylet, GCS and workers); no other Ray process of the host.
B=${RAY_BASE:-/tmp/tx-ray-head}
if [ -f "$B/head.pid" ]; then
  p=$(cat "$B/head.pid")
  kill -TERM -- "-$p" 2>/dev/null || true
  T=$(cat "$B/temp-dir" 2>/dev/null || true)
  for _ in $(seq 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
  kill -KILL -- "-$p" 2>/dev/null || true
  if [ -n "${T:-}" ]; then pkill -KILL -f -- "$T" 2>/dev/null || true; rm -rf "$T"; fi
  rm -f "$B/head.pid" "$B/temp-dir"
fi
echo "[stop-ray] stopped" >&2
