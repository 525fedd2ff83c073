#!/usr/bin/env bash
# Start a TorchServe 0.12 on 127.0.0.1 by hand, in the configuration the serve.torchserve tests
# start for themselves (tx.testing.torchserve): its own model store, config, log and temp
# directories under $TORCHSERVE_BASE, its own ports, --disable-token-auth --enable-model-api
# --ncs (0.12 registers models through the management API only with the model API enabled, and
# without a token only with token auth disabled). Prints `export TORCHSERVE_MANAGEMENT_API=...
# TORCHSERVE_INFERENCE_API=...`.
#
#   eval "$(scripts/start-torchserve.sh)"
#   tx run -s local_cwd serve.torchserve --model_path m.mar --management_api "$TORCHSERVE_MANAGEMENT_API" \
#     --params model_name=m,initial_workers=1,synchronous=true,port=0
#   scripts/stop-torchserve.sh
#
# Env: TORCHSERVE_BASE (default /tmp/tx-torchserve), TORCHSERVE_PORT (18080: inference),
#      TORCHSERVE_MANAGEMENT_PORT (default TORCHSERVE_PORT+1), TORCHSERVE_METRICS_PORT (+2),
#      TORCHSERVE_GRPC_PORT (+3: gRPC inference), TORCHSERVE_GRPC_MANAGEMENT_PORT (+4)
#      (TorchServe's defaults 7070/7071 collide with any other TorchServe on the host). Needs
#      torchserve, torch-model-archiver and pyyaml (pip) and a Java runtime
#      (apt-get install openjdk-17-jre-headless).
set -euo pipefail
B=${TORCHSERVE_BASE:-/tmp/tx-torchserve}
P=${TORCHSERVE_PORT:-18080}
INF="http://127.0.0.1:$P" MGMT="http://127.0.0.1:${TORCHSERVE_MANAGEMENT_PORT:-$((P + 1))}"
MET="http://127.0.0.1:${TORCHSERVE_METRICS_PORT:-$((P + 2))}"
command -v torchserve >/dev/null || { echo "[start-torchserve] torchserve not found: pip install torchserve==0.12.0 torch-model-archiver==0.12.0 pyyaml" >&2; exit 1; }
command -v java >/dev/null || { echo "[start-torchserve] java not found: apt-get install openjdk-17-jre-headless" >&2; exit 1; }
mkdir -p "$B/model-store" "$B/logs" "$B/tmp"
if [ -f "$B/torchserve.pid" ] && kill -0 "$(cat "$B/torchserve.pid")" 2>/dev/null; then
  echo "[start-torchserve] already running (pid $(cat "$B/torchserve.pid"))" >&2
else
  cat > "$B/config.properties" <<CONF
inference_address=$INF
management_address=$MGMT
metrics_address=$MET
grpc_inference_port=${TORCHSERVE_GRPC_PORT:-$((P + 3))}
grpc_management_port=${TORCHSERVE_GRPC_MANAGEMENT_PORT:-$((P + 4))}
default_workers_per_model=1
disable_system_metrics=true
vmargs=-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
CONF
  # logs (LOG_LOCATION, METRICS_LOCATION), the JVM's temp dir (TEMP) and torchserve's pid file
  # (Python's temp dir: TMPDIR) all under $B, so another TorchServe on the host is left alone
  LOG_LOCATION="$B/logs" METRICS_LOCATION="$B/logs" TEMP="$B/tmp" TMPDIR="$B/tmp" \
    setsid torchserve --foreground --model-store "$B/model-store" --ts-config "$B/config.properties" \
    --disable-token-auth --enable-model-api --ncs > "$B/torchserve.out" 2>&1 < /dev/null &
  echo $! > "$B/torchserve.pid"
fi
# up when the management API answers (a server found running may still be starting, and a
# loaded JVM can take seconds to answer): up to about 2 minutes
up=
for _ in $(seq 120); do
  if timeout 5 curl -sf "$MGMT/models" >/dev/null 2>&1; then up=1; break; fi
  sleep 0.5
done
[ -n "$up" ] || { echo "[start-torchserve] no server on $MGMT:" >&2; tail -20 "$B/torchserve.out" >&2; exit 1; }
echo "[start-torchserve] up: inference $INF, management $MGMT, logs $B/logs" >&2
echo "export TORCHSERVE_MANAGEMENT_API=$MGMT TORCHSERVE_INFERENCE_API=$INF"
