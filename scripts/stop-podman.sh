#!/usr/bin/env bash
# Stop the podman API service that start-podman.sh started under $PODMAN_BASE (default /tmp/tx-podman),
# by its recorded PID only. Containers keep running unless PURGE=1, which also removes every container,
# network (with its host bridge and firewall rules) and image of that base and deletes the directory.
#
#   scripts/stop-podman.sh            # PURGE=1 scripts/stop-podman.sh
B=${PODMAN_BASE:-/tmp/tx-podman}
export CONTAINERS_CONF=$B/conf/containers.conf CONTAINERS_STORAGE_CONF=$B/conf/storage.conf
export CONTAINERS_REGISTRIES_CONF=$B/conf/registries.conf
if [ -f "$B/service.pid" ]; then
  p=$(cat "$B/service.pid")
  kill "$p" 2>/dev/null
  for _ in $(seq 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
  kill -9 "$p" 2>/dev/null
  rm -f "$B/service.pid" "$B/podman.sock"
fi
if [ "${PURGE:-0}" = 1 ] && [ -f "$CONTAINERS_CONF" ]; then
  # the host bridges of this engine's networks: netavark removes one only when the last
  # container on it is torn down, which a killed engine never does
  bridges=$(sed -n 's/.*"network_interface": *"\([^"]*\)".*/\1/p' "$B"/networks/*.json 2>/dev/null)
  ids=$(timeout 60 podman ps -a -q --no-trunc 2>/dev/null)
  timeout 120 podman rm -a -f -t 0 >/dev/null 2>&1
  # the host-port DNAT rules of containers whose engine was killed under them (no teardown)
  bash "$(dirname "$0")/drop-podman-dnat.sh" $ids
  timeout 60 podman network prune -f >/dev/null 2>&1
  timeout 120 podman system reset -f >/dev/null 2>&1
  for i in $bridges; do ip link del "$i" 2>/dev/null; done
  umount "$B/storage/overlay" 2>/dev/null
  rm -rf "$B"
fi
echo "[stop-podman] stopped ($B)" >&2
