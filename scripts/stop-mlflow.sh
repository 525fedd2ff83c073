#!/usr/bin/env bash
# Stop the MLflow server started by start-mlflow.sh (its process group only). PURGE=1 also
# deletes its store and artifacts.
B=${MLFLOW_BASE:-/tmp/tx-mlflow}
if [ -f "$B/mlflow.pid" ]; then
  p=$(cat "$B/mlflow.pid"); kill -TERM -- "-$p" 2>/dev/null || true
  for _ in $(seq 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
  kill -KILL -- "-$p" 2>/dev/null || true; rm -f "$B/mlflow.pid"
fi
[ "${PURGE:-0}" = 1 ] && rm -rf "$B"
echo "[stop-mlflow] stopped" >&2
