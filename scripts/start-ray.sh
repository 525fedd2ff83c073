#!/usr/bin/env bash
# Start a private local Ray head (dashboard + Job Submission API) by hand, as the
# tx-scheduler-ray tests do for themselves: its own --temp-dir, its own ports on 127.0.0.1,
# never a Ray cluster of yours. Prints `export RAY_ADDRESS=...`.
#
#   eval "$(scripts/start-ray.sh)"   ...   scripts/stop-ray.sh
#
# Env: RAY_BASE (default /tmp/tx-ray-head: pid file, log; the temp dir is a short path under
#      /tmp because Ray's socket paths must stay under 108 bytes), RAY_DASHBOARD_PORT (8266),
#      RAY_GCS_PORT (6390), RAY_METRIC_PORT (8267: the dashboard's metrics server, which
#      otherwise takes Ray's fixed 44227, so that two heads collide), RAY_NUM_CPUS (2). `ray` comes from PATH (pip install 'ray[default]').
# Not `ray stop`: that kills every Ray process of the host; stop-ray.sh ends this head only.
set -euo pipefail
B=${RAY_BASE:-/tmp/tx-ray-head}
DASH=${RAY_DASHBOARD_PORT:-8266}
GCS=${RAY_GCS_PORT:-6390}
CPUS=${RAY_NUM_CPUS:-2}
METRIC=${RAY_METRIC_PORT:-8267}
command -v ray >/dev/null || { echo "[start-ray] ray not found: pip install 'ray[default]'" >&2; exit 1; }
mkdir -p "$B"
if [ -f "$B/head.pid" ] && kill -0 "$(cat "$B/head.pid")" 2>/dev/null; then
  echo "[start-ray] already running (pid $(cat "$B/head.pid"))" >&2
else
  T=$(mktemp -d /tmp/txray-XXXXXX)
  echo "$T" > "$B/temp-dir"
  # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 keeps Ray 2.60 on 127.0.0.1 (it otherwise moves to
  # the host's first address); the venv's bin first on PATH so jobs run its python
  RAY_USAGE_STATS_ENABLED=0 RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 DASHBOARD_METRIC_PORT="$METRIC" setsid ray start --head --block \
    --node-ip-address=127.0.0.1 --port="$GCS" --num-cpus="$CPUS" --include-dashboard=true \
    --dashboard-host=127.0.0.1 --dashboard-port="$DASH" --temp-dir="$T" --disable-usage-stats \
    > "$B/head.log" 2>&1 < /dev/null &
  echo $! > "$B/head.pid"
  for _ in $(seq 240); do
    timeout 2 curl -sf "http://127.0.0.1:$DASH/api/version" >/dev/null 2>&1 && break
    kill -0 "$(cat "$B/head.pid")" 2>/dev/null || { echo "[start-ray] the head exited:" >&2; tail -20 "$B/head.log" >&2; exit 1; }
    sleep 0.5
  done
fi
timeout 5 curl -sf "http://127.0.0.1:$DASH/api/version" >/dev/null || { echo "[start-ray] no dashboard on $DASH" >&2; tail -20 "$B/head.log" >&2; exit 1; }
echo "[start-ray] up: dashboard http://127.0.0.1:$DASH" >&2
echo "export RAY_ADDRESS=http://127.0.0.1:$DASH"
