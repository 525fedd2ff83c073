#!/usr/bin/env bash
# A private one-host OpenLava cluster (an open-source, LSF-compatible batch system; LSF 4.x
# lineage, GPLv2) on this host, from the build scripts/install-openlava.sh made in OL_PREFIX
# (built here first when missing). Everything the cluster writes (its configuration, the
# daemons' logs and state) is under OL_BASE, so that clusters with their own OL_BASE and ports
# share one build. Prints the `export` line its clients need (LSF_ENVDIR, PATH). Start ~10 s.
#
#   eval "$(scripts/start-openlava.sh)"; bsub ...; scripts/stop-openlava.sh
#
# Env: OL_PREFIX (the build, /tmp/tx-openlava), OL_BASE (the cluster, default OL_PREFIX),
#      OL_PORT_BASE (16322: LIM, RES, mbatchd, sbatchd on the next four ports), OL_CLUSTER (tx),
#      OL_SLOTS (job slots of the host, 8), OL_MAX_JOB_ARRAY_SIZE (lsb.params' MAX_JOB_ARRAY_SIZE;
#      unset: OpenLava's default, 1000), for tests of sweeps larger than one job array.
#
# Facts found while making this recipe (they matter to an LSF scheduler tested against it):
# - OpenLava's CLI is a subset of IBM LSF 10's: no `bjobs -o`, `-json`, `-X`; no `bhosts -o/-noheader`.
#   LSF 10 flags it lacks are silently misread by getopt: `-oo F` = `-o o` + command F, `-eo` = `-e o`,
#   `-outdir D` = `-o utdir`, `-env ...` = `-e nv`, `-cwd D` = CPU limit (rejected), and `-gpu ...`
#   = job group `pu`, which crashed mbatchd (restarted by sbatchd ~35 s later).
# - Works on both: bsub -P -J -m -q -n -R "span[..] rusage[..] select[..]" -w "started()/done()"
#   -o/-e (%J, %I) -K (waits, returns the job's exit code) -W -M -g /grp, job arrays "name[1-3]",
#   the script on stdin; bjobs -a -noheader -w [-P p] [-J n], -W, -l / -UF ("Exited with exit code N");
#   bkill ids (a killed running job ends EXIT with exit code 130, as IBM LSF); bhosts -w; lshosts.
# - OpenLava writes a job's -o/-e output when the job ends, after a report header: tx's replicas
#   write their own output files as they run.
# - root may submit only with LSF_ROOT_REX=local (set below). MBD/SBD_SLEEP_TIME=1 make a trivial
#   job finish in ~1 s instead of 3-12 s. Each mbatchd restart advances job ids by ~100.
# - Job arrays: MAX_JOB_ARRAY_SIZE (lsb.params, default 1000; `bparams -l` prints it) bounds the
#   elements of one bsub, indices stay below 65535; `-w "ended(<array job id>)"` waits for every
#   element; `bkill "id[i]"` kills one element.
# - A job killed in the second it started can be reported DONE with empty output (an OpenLava race).
# - One host only (127.0.0.1 under this machine's host name): multi-host placement can only pend.
# - A job's file and output buffer go to JOB_SPOOL_DIR (lsb.params; set below to OL_BASE/spool),
#   else to the user's ~/.lsbatch, named <submit time>.<job id>: shared by every cluster of the host.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OL_PREFIX=${OL_PREFIX:-/tmp/tx-openlava}
OL_BASE=${OL_BASE:-$OL_PREFIX}
BASE=${OL_PORT_BASE:-16322}
CLUSTER=${OL_CLUSTER:-tx}
SLOTS=${OL_SLOTS:-8}
MAX_ARRAY=${OL_MAX_JOB_ARRAY_SIZE:-}
case "$MAX_ARRAY" in *[!0-9]*) echo "OL_MAX_JOB_ARRAY_SIZE must be a number, got '$MAX_ARRAY'" >&2; exit 2;; esac
H=$(hostname)
[ -x "$OL_PREFIX/sbin/mbatchd" ] || OL_PREFIX=$OL_PREFIX bash "$HERE/install-openlava.sh" >&2
E=$OL_BASE/etc
if [ "$OL_BASE" != "$OL_PREFIX" ] && [ ! -f "$E/lsf.conf" ]; then
  mkdir -p "$E" "$OL_BASE/log" "$OL_BASE/work/logdir"
  for f in lsf.conf lsf.cluster.$CLUSTER lsf.shared lsf.task lsb.hosts lsb.params lsb.queues lsb.users lsb.resources; do
    cp "$OL_PREFIX/etc/$f" "$E/"
  done
  sed -i "s#^LSB_SHAREDIR=.*#LSB_SHAREDIR=$OL_BASE/work#; s#^LSF_ENVDIR=.*#LSF_ENVDIR=$E#; \
          s#^LSF_CONFDIR=.*#LSF_CONFDIR=$E#; s#^LSB_CONFDIR=.*#LSB_CONFDIR=$E#; \
          s#^LSF_LOGDIR=.*#LSF_LOGDIR=$OL_BASE/log#" "$E/lsf.conf"
fi
grep -q "^$H " "$E/lsf.cluster.$CLUSTER" || \
  sed -i "s/^# yourhost .*/&\n$H                  IntelI5      linux   1      3.5    (cs)/" "$E/lsf.cluster.$CLUSTER"
grep -q '^LSF_ROOT_REX=local' "$E/lsf.conf" || echo 'LSF_ROOT_REX=local' >> "$E/lsf.conf"   # root may bsub
sed -i "s/^LSF_LIM_PORT=.*/LSF_LIM_PORT=$BASE/; s/^LSF_RES_PORT=.*/LSF_RES_PORT=$((BASE + 1))/; \
        s/^LSB_MBD_PORT=.*/LSB_MBD_PORT=$((BASE + 2))/; s/^LSB_SBD_PORT=.*/LSB_SBD_PORT=$((BASE + 3))/" "$E/lsf.conf"
sed -i 's/^MBD_SLEEP_TIME = .*/MBD_SLEEP_TIME = 1/; s/^SBD_SLEEP_TIME = .*/SBD_SLEEP_TIME = 1/' "$E/lsb.params"
sed -i '/^MAX_JOB_ARRAY_SIZE *=/d' "$E/lsb.params"
# the cluster's own job spool: without it sbatchd keeps each job's file and output buffer in
# the user's ~/.lsbatch as <submit time>.<job id>[.<index>], and two clusters whose job ids
# meet in one second share those names: one cluster's bkill deleted the other's files
mkdir -p "$OL_BASE/spool" && chmod 1777 "$OL_BASE/spool"
sed -i '/^JOB_SPOOL_DIR *=/d' "$E/lsb.params"
sed -i "/^End Parameters/i JOB_SPOOL_DIR = $OL_BASE/spool" "$E/lsb.params"
[ -z "$MAX_ARRAY" ] || sed -i "/^End Parameters/i MAX_JOB_ARRAY_SIZE = $MAX_ARRAY" "$E/lsb.params"
# the host's job slots (MXJ; "!" = its CPUs): the tests run apps of 4 one-slot replicas on 2 cores
grep -q "^$H " "$E/lsb.hosts" || sed -i "s/^default .*/$H  $SLOTS  ()  ()  ()  ()  ()  ()\n&/" "$E/lsb.hosts"
export LSF_ENVDIR=$E LSF_SERVERDIR=$OL_PREFIX/sbin LSF_BINDIR=$OL_PREFIX/bin LSF_LIBDIR=$OL_PREFIX/lib
export PATH=$OL_PREFIX/bin:$PATH
up() { (exec 3<>"/dev/tcp/127.0.0.1/$((BASE + 2))") 2>/dev/null && timeout 5 bhosts 2>/dev/null | grep -q "^$H .* ok "; }
if ! up; then
  "$LSF_SERVERDIR/lim"; "$LSF_SERVERDIR/res"; "$LSF_SERVERDIR/sbatchd"   # sbatchd starts mbatchd
  for _ in $(seq 120); do up && break; sleep 0.5; done
  up || { echo "openlava did not come up (see $OL_BASE/log)" >&2; exit 1; }
fi
echo "export LSF_ENVDIR=$E LSF_SERVERDIR=$LSF_SERVERDIR LSF_BINDIR=$LSF_BINDIR LSF_LIBDIR=$LSF_LIBDIR PATH=$PATH"
