#!/usr/bin/env bash
# Install the Debian packages of a Docker-compatible engine: podman (its Docker API service),
# runc (crun fails on hybrid cgroup v1/v2 hosts), busybox-static (the tiny test image),
# netavark/aardvark-dns/iptables/containernetworking-plugins (bridge networks with DNS),
# uidmap and catatonit, and docker-registry (a private registry to push to). About 10 s and 125 MB. Idempotent: installs nothing when every
# command is present. Needs root (apt-get).
#
#   scripts/install-podman.sh && eval "$(scripts/start-podman.sh)"
#
# Env: PODMAN_APT_UPDATE=1 runs `apt-get update` first (by default it runs only when the
#      install fails, e.g. on a fresh image without package lists).
set -euo pipefail
log() { echo "[install-podman] $*" >&2; }
version() { podman --version 2>/dev/null || echo unknown; }

# docker-registry (Distribution 2.8, 20 MB): a private registry for the tests that push images
packages=(podman runc busybox-static uidmap netavark aardvark-dns iptables containernetworking-plugins catatonit
          docker-registry)
missing=()
for b in podman runc iptables newuidmap docker-registry; do command -v "$b" >/dev/null 2>&1 || missing+=("$b"); done
[ -x /bin/busybox ] || missing+=(/bin/busybox)
[ -x /usr/lib/podman/netavark ] || command -v netavark >/dev/null 2>&1 || missing+=(netavark)
if [ ${#missing[@]} -eq 0 ]; then
  log "already installed: $(version)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  log "missing ${missing[*]}; as root run: apt-get install ${packages[*]}"
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
install() { timeout 600 apt-get install -y -q --no-install-recommends "${packages[@]}" >&2; }
if [ "${PODMAN_APT_UPDATE:-0}" = 1 ]; then
  timeout 300 apt-get update -q >&2
  install
elif ! install; then
  log "install failed; running apt-get update and trying again"
  timeout 300 apt-get update -q >&2
  install
fi
log "installed: $(version)"
