#!/usr/bin/env bash
# Start a private Docker-compatible API service from podman (as root) on unix://$PODMAN_BASE/podman.sock,
# with everything it keeps under $PODMAN_BASE (default /tmp/tx-podman): storage, run state, networks,
# events, temp files. Several services with different PODMAN_BASE can run at once; nothing of the
# system's podman or docker is touched. Also imports a 2 MB busybox image, localhost/busybox:tx, made
# from Debian's busybox-static without any registry. Idempotent: a second call only prints the exports.
#
#   scripts/install-podman.sh && eval "$(scripts/start-podman.sh)"   # exports DOCKER_HOST, CONTAINERS_CONF, CONTAINERS_STORAGE_CONF, CONTAINERS_REGISTRIES_CONF
#
# Env: PODMAN_BASE (default /tmp/tx-podman; at most 46 characters, podman's runroot limit); PODMAN_INSECURE_REGISTRIES=host:port,... registries
#      reached over plain HTTP (read when the service starts); PODMAN_EVENTS_LOGGER (default file):
#      containers.conf's events_logger, "none" for an engine that keeps no events (its compat
#      logs?follow=1 streams then never end: tests/test_docker_follow.py).
#
# Settings (all needed on this kind of host, see scripts/README.md): runc (crun fails on hybrid
# cgroup v1/v2), cgroupfs, ulimits within the host's hard limits (no CAP_SYS_RESOURCE), netavark
# bridge networks with DNS (containers reach each other by name on a user network).
set -euo pipefail
B=${PODMAN_BASE:-/tmp/tx-podman}
case "${PODMAN_EVENTS_LOGGER:-file}" in
  file|none|journald) ;;
  *) echo "[start-podman] PODMAN_EVENTS_LOGGER must be file, none or journald, not '$PODMAN_EVENTS_LOGGER'" >&2; exit 2 ;;
esac
log() { echo "[start-podman] $*" >&2; }
if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1 || [ ! -x /bin/busybox ]; then
  bash "$(dirname "$0")/install-podman.sh"
fi
B=$(realpath -m "$B")
# podman refuses a runroot longer than 50 characters, but only in `podman container cleanup`,
# the command conmon runs when a container exits: the service starts, containers run, and a
# restart policy silently never fires (the exit command fails with code 125 into syslog)
if [ $(( ${#B} + 4 )) -gt 50 ]; then
  log "PODMAN_BASE $B is longer than 46 characters: podman refuses its runroot $B/run (over 50)"
  exit 2
fi
mkdir -p "$B/conf" "$B/networks" "$B/tmp"
cat > "$B/conf/containers.conf.new" <<EOC
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "${PODMAN_EVENTS_LOGGER:-file}"
events_logfile_path = "$B/events.log"
tmp_dir = "$B/tmp"
[network]
network_backend = "netavark"
network_config_dir = "$B/networks"
EOC
mv "$B/conf/containers.conf.new" "$B/conf/containers.conf"
# registries: Docker's search order for short names; PODMAN_INSECURE_REGISTRIES (host:port,...)
# are reached over plain HTTP (a private test registry)
{
  echo 'unqualified-search-registries = ["docker.io"]'
  for r in $(echo "${PODMAN_INSECURE_REGISTRIES:-}" | tr ',' ' '); do
    printf '[[registry]]\nlocation = "%s"\ninsecure = true\n' "$r"
  done
} > "$B/conf/registries.conf"
cat > "$B/conf/storage.conf" <<EOC
[storage]
driver = "overlay"
graphroot = "$B/storage"
runroot = "$B/run"
EOC
export CONTAINERS_CONF=$B/conf/containers.conf CONTAINERS_STORAGE_CONF=$B/conf/storage.conf
export CONTAINERS_REGISTRIES_CONF=$B/conf/registries.conf
if ! timeout 60 podman image exists localhost/busybox:tx 2>/dev/null; then
  r=$B/rootfs
  rm -rf "$r"; mkdir -p "$r/bin" "$r/tmp" "$r/usr" "$r/etc" "$r/root"
  ln -s usr/lib "$r/lib"; ln -s usr/lib64 "$r/lib64"   # so that a bind-mounted host /usr runs (merged /usr)
  chmod 1777 "$r/tmp"
  cp /bin/busybox "$r/bin/busybox"
  for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$r/bin/$a"; done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$r/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' > "$r/etc/group"
  tar -C "$r" -cf "$B/busybox.tar" . && timeout 120 podman import -q "$B/busybox.tar" localhost/busybox:tx >/dev/null
  rm -rf "$r" "$B/busybox.tar"
  log "imported localhost/busybox:tx"
fi
ping() { timeout 2 curl -sf --unix-socket "$B/podman.sock" http://d/_ping >/dev/null 2>&1; }
if ! { [ -f "$B/service.pid" ] && kill -0 "$(cat "$B/service.pid")" 2>/dev/null; }; then
  rm -f "$B/podman.sock"
  # in $B: conmon writes an "oom" marker into its working directory when a container is
  # OOM-killed, which must never be the caller's directory
  (cd "$B" && exec setsid nohup podman system service --time=0 "unix://$B/podman.sock" > "$B/service.log" 2>&1 < /dev/null) &
  echo $! > "$B/service.pid"
fi
for _ in $(seq 80); do ping && break; sleep 0.25; done
ping || { log "service did not answer on $B/podman.sock"; tail "$B/service.log" >&2; exit 1; }
log "up on unix://$B/podman.sock: $(timeout 5 curl -s --unix-socket "$B/podman.sock" http://d/version | head -c 100)"
echo "export DOCKER_HOST=unix://$B/podman.sock CONTAINERS_CONF=$CONTAINERS_CONF CONTAINERS_STORAGE_CONF=$CONTAINERS_STORAGE_CONF CONTAINERS_REGISTRIES_CONF=$CONTAINERS_REGISTRIES_CONF"
