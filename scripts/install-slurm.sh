#!/usr/bin/env bash
# Install the Debian packages of a local Slurm cluster: slurmctld, slurmd, slurm-client and
# munge (about 10 s, 13 MB). Idempotent: installs nothing when every command is on PATH.
# Needs root (apt-get).
#
#   scripts/install-slurm.sh && eval "$(scripts/start-slurm.sh)"
#
# Env: SLURM_ACCT=1 also installs slurmdbd and mariadb-server (accounting: sacct);
#      SLURM_APT_UPDATE=0 skips `apt-get update` (run by default: fresh images have no lists).
set -euo pipefail
log() { echo "[install-slurm] $*" >&2; }
version() { dpkg-query -W -f '${Version}' slurm-client 2>/dev/null || echo unknown; }

packages=(slurmctld slurmd slurm-client munge)
commands=(slurmctld slurmd munged sinfo sbatch squeue sacct scontrol scancel)
if [ "${SLURM_ACCT:-0}" = 1 ]; then
  packages+=(slurmdbd mariadb-server)
  commands+=(slurmdbd mariadbd)
fi

missing=()
for b in "${commands[@]}"; do command -v "$b" >/dev/null 2>&1 || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then
  log "already installed: slurm $(version)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  log "missing ${missing[*]}; as root run: apt-get install ${packages[*]}"
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if [ "${SLURM_APT_UPDATE:-1}" = 1 ]; then
  timeout 300 apt-get update -q >&2
fi
timeout 600 apt-get install -y -q --no-install-recommends "${packages[@]}" >&2
log "installed: slurm $(version)"
