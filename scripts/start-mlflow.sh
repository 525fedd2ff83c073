#!/usr/bin/env bash
# Start an MLflow tracking server on 127.0.0.1 by hand (a sqlite store and an artifact
# directory of its own), as the tx-tracker-mlflow tests do for themselves. Prints
# `export MLFLOW_TRACKING_URI=...`.
#
#   eval "$(scripts/start-mlflow.sh)"   ...   scripts/stop-mlflow.sh
#
# Env: MLFLOW_BASE (default /tmp/tx-mlflow), MLFLOW_PORT (5055). Needs the full `mlflow`
#      (pip install mlflow; mlflow-skinny has no server with sqlite).
set -euo pipefail
B=${MLFLOW_BASE:-/tmp/tx-mlflow}
PORT=${MLFLOW_PORT:-5055}
command -v mlflow >/dev/null || { echo "[start-mlflow] mlflow not found: pip install mlflow" >&2; exit 1; }
mkdir -p "$B/artifacts"
if [ -f "$B/mlflow.pid" ] && kill -0 "$(cat "$B/mlflow.pid")" 2>/dev/null; then
  echo "[start-mlflow] already running (pid $(cat "$B/mlflow.pid"))" >&2
else
  # without job execution the server spawns no huey workers (about 0.5 GB instead of 1.7 GB)
  MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false setsid mlflow server --host 127.0.0.1 --port "$PORT" \
    --workers 1 --backend-store-uri "sqlite:///$B/mlflow.db" --artifacts-destination "$B/artifacts" \
    > "$B/mlflow.log" 2>&1 < /dev/null &
  echo $! > "$B/mlflow.pid"
  for _ in $(seq 120); do timeout 2 curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break; sleep 0.5; done
fi
timeout 5 curl -sf "http://127.0.0.1:$PORT/health" >/dev/null || { echo "[start-mlflow] no server on $PORT:" >&2; tail -20 "$B/mlflow.log" >&2; exit 1; }
echo "[start-mlflow] up on http://127.0.0.1:$PORT" >&2
echo "export MLFLOW_TRACKING_URI=http://127.0.0.1:$PORT"
