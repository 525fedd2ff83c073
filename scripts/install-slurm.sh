#!/usr/bin/env bash
# Install the Debian packages of a local Slurm cluster (slurmctld, slurmd, slurm-client, munge).
# Idempotent: does nothing when every binary is already on PATH. Needs root (apt-get).
# Usage: scripts/install-slurm.sh        (then: eval "$(scripts/start-slurm.sh)")
# Env: SLURM_APT_UPDATE=0 skips `apt-get update` (on by default: a fresh image has no lists).
set -euo pipefail
log() { echo "[install-slurm] $*" >&2; }

missing=()
for b in slurmctld slurmd munged sinfo sbatch squeue scontrol scancel; do
  command -v "$b" >/dev/null 2>&1 || missing+=("$b")
done
if [ ${#missing[@]} -eq 0 ]; then
  log "already installed: slurm $(dpkg-query -W -f '${Version}' slurm-client 2>/dev/null)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  log "missing ${missing[*]}; run as root: apt-get install slurmctld slurmd slurm-client munge"
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if [ "${SLURM_APT_UPDATE:-1}" = 1 ]; then
  timeout 300 apt-get update -q >&2
fi
timeout 600 apt-get install -y -q --no-install-recommends slurmctld slurmd slurm-client munge >&2
log "installed: $(dpkg-query -W -f '${Version}' slurm-client 2>/dev/null)"
