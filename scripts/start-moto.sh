#!/usr/bin/env bash
# Start moto_server (AWS Batch and CloudWatch Logs emulation) on 127.0.0.1 by hand, as the
# tx-scheduler-aws-batch tests do for themselves. Prints the AWS_* exports that point boto3
# (and tx) at it, with dummy credentials; never touches a real AWS account.
#
#   eval "$(scripts/start-moto.sh)"   ...   scripts/stop-moto.sh
#
# Env: MOTO_BASE (default /tmp/tx-moto), MOTO_PORT (5005), MOTO_BATCH_DOCKER=1 runs Batch jobs
#      as real containers on the engine of DOCKER_HOST (e.g. scripts/start-podman.sh), else
#      jobs finish at once without containers (moto's simple mode).
set -euo pipefail
B=${MOTO_BASE:-/tmp/tx-moto}
PORT=${MOTO_PORT:-5005}
command -v moto_server >/dev/null || { echo "[start-moto] moto_server not found: pip install 'moto[server,batch,logs]'" >&2; exit 1; }
mkdir -p "$B"
if [ -f "$B/moto.pid" ] && kill -0 "$(cat "$B/moto.pid")" 2>/dev/null; then
  echo "[start-moto] already running (pid $(cat "$B/moto.pid"))" >&2
else
  setsid moto_server -H 127.0.0.1 -p "$PORT" > "$B/moto.log" 2>&1 < /dev/null &
  echo $! > "$B/moto.pid"
  for _ in $(seq 100); do timeout 2 curl -sf "http://127.0.0.1:$PORT/moto-api/" >/dev/null 2>&1 && break; sleep 0.2; done
fi
use_docker=false; [ "${MOTO_BATCH_DOCKER:-0}" = 1 ] && use_docker=true
timeout 5 curl -sf -X POST -H 'Content-Type: application/json' \
  -d "{\"batch\": {\"use_docker\": $use_docker}}" "http://127.0.0.1:$PORT/moto-api/config" >/dev/null \
  || { echo "[start-moto] moto_server did not answer:" >&2; tail -20 "$B/moto.log" >&2; exit 1; }
echo "[start-moto] up on 127.0.0.1:$PORT (Batch docker mode: $use_docker)" >&2
echo "export AWS_ENDPOINT_URL=http://127.0.0.1:$PORT AWS_DEFAULT_REGION=us-east-1 AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing"
