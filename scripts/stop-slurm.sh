#!/usr/bin/env bash
# Stop the private Slurm cluster started by scripts/start-slurm.sh. Only the PIDs recorded
# in $SLURM_BASE/run/*.pid are signalled (TERM, then KILL after 10 s), in three waves:
# heartbeat and slurmd, then slurmctld, slurmdbd and mariadb, then munged. Idempotent.
# Env: SLURM_BASE (default /tmp/tx-slurm); PURGE=1 also deletes $SLURM_BASE (state, logs,
#      finished jobs; job ids start at 1 again).
set -uo pipefail
B=${SLURM_BASE:-/tmp/tx-slurm}

stop() { # pidfile...: TERM to all, wait up to 10 s, KILL what is left
  local f p pids=()
  for f in "$@"; do
    [ -f "$f" ] || continue
    p=$(cat "$f")
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
      kill "$p" 2>/dev/null && pids+=("$p")
    fi
    rm -f "$f"
  done
  for _ in $(seq 40); do
    local alive=()
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive+=("$p"); done
    pids=("${alive[@]}")
    [ ${#pids[@]} -eq 0 ] && return 0
    sleep 0.25
  done
  kill -9 "${pids[@]}" 2>/dev/null
  return 0
}

stop $B/run/heartbeat.pid $B/run/slurmd-*.pid
stop $B/run/slurmctld.pid $B/run/slurmdbd.pid $B/run/mariadb.pid
stop $B/run/munged.pid
[ "${PURGE:-0}" = 1 ] && rm -rf "$B"
echo "[stop-slurm] stopped" >&2
