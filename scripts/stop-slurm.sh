#!/usr/bin/env bash
# Stop the private Slurm cluster started by scripts/start-slurm.sh. Only the PIDs recorded in
# $SLURM_BASE/run/*.pid are signalled (TERM, then KILL after 10 s). Idempotent.
# Env: SLURM_BASE (default /tmp/tx-slurm); PURGE=1 also deletes $SLURM_BASE (state, logs).
set -uo pipefail
B=${SLURM_BASE:-/tmp/tx-slurm}
stop() { # pidfile
  local f=$1 p
  [ -f "$f" ] || return 0
  p=$(cat "$f")
  if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
    kill "$p"
    for _ in $(seq 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$p" 2>/dev/null && kill -9 "$p"
  fi
  rm -f "$f"
}
for n in node1 node2; do stop $B/run/slurmd-$n.pid; done
stop $B/run/slurmctld.pid
stop $B/run/slurmdbd.pid
stop $B/run/mariadb.pid
stop $B/run/munged.pid
[ "${PURGE:-0}" = 1 ] && rm -rf "$B"
echo "[stop-slurm] stopped" >&2
