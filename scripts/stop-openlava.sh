#!/usr/bin/env bash
# Stops the daemons of one private OpenLava cluster (start-openlava.sh): only processes whose
# binary lives under OL_PREFIX/sbin and whose LSF_ENVDIR is this cluster's ($OL_BASE/etc), so a
# cluster of another OL_BASE on the same build keeps running. mbatchd is left orphaned by the
# shutdown commands: killed by pid. PURGE=1 also deletes OL_BASE (unless it is the build).
OL_PREFIX=${OL_PREFIX:-/tmp/tx-openlava}
OL_BASE=${OL_BASE:-$OL_PREFIX}
E=$OL_BASE/etc
[ -f "$E/lsf.conf" ] || exit 0
export LSF_ENVDIR=$E LSF_SERVERDIR=$OL_PREFIX/sbin LSF_BINDIR=$OL_PREFIX/bin LSF_LIBDIR=$OL_PREFIX/lib
export PATH=$OL_PREFIX/bin:$PATH
timeout 20 badmin hshutdown -f >/dev/null 2>&1; echo y | timeout 20 lsadmin resshutdown >/dev/null 2>&1
echo y | timeout 20 lsadmin limshutdown >/dev/null 2>&1
ours() {
  for p in $(ps -eo pid=,args= | awk -v s="$OL_PREFIX/sbin/" 'index($2, s)==1 {print $1}'); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "LSF_ENVDIR=$E" && echo "$p"
  done
}
for _ in $(seq 20); do
  pids=$(ours)
  [ -z "$pids" ] && break
  kill $pids 2>/dev/null; sleep 0.5
done
pids=$(ours); [ -z "$pids" ] || kill -9 $pids 2>/dev/null
if [ "${PURGE:-0}" = 1 ] && [ "$OL_BASE" != "$OL_PREFIX" ]; then rm -rf "$OL_BASE"; fi
exit 0
