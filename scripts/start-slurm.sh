#!/usr/bin/env bash
# Start a private Slurm cluster on 127.0.0.1 from Debian's packages: munged, slurmctld and
# one slurmd per node (`slurmd -N node1`, `slurmd -N node2`, ...), all state under
# $SLURM_BASE. Needs root and the packages from scripts/install-slurm.sh.
#
#   eval "$(scripts/start-slurm.sh)"      # prints only `export SLURM_CONF=...` on stdout
#
# Idempotent: when the cluster is already up it only prints the export line (a changed
# configuration restarts the daemons). Returns once every node is usable (about a second),
# or exits 1 with the controller's log tail.
#
# The cluster is shaped like many real ones, on purpose:
# * NodeName (node1, node2, ...) is not a resolvable host name; NodeHostname is this host
#   and NodeAddr=127.0.0.1, so a job that hands `node1` to another program as an address
#   fails: a scheduler must use the node's NodeAddr (`scontrol show node`).
# * no accounting (sacct fails); finished jobs stay visible to squeue/scontrol for
#   MinJobAge seconds and are appended to jobcomp/filetxt ($SLURM_BASE/log/jobcomp.txt).
# * partition `down` holds one node, down1, defined DOWN and never started (no slurmd): a
#   job submitted there stays PENDING (ReqNodeNotAvail), as on a cluster whose nodes are
#   down. `debug` (the default) is node1..nodeN, the only nodes the start waits for.
# * a heartbeat process touches the partition every 2 s so that the backfill scheduler runs
#   as on a busy cluster (see start_heartbeat); requeued jobs restart in seconds.
#
# Env: SLURM_BASE (default /tmp/tx-slurm);
#      SLURM_NODES (default 4): nodes node1..nodeN, one slurmd each. Slurm never places two
#      components of one heterogeneous job on the same node, so an app of R replicas in all
#      needs R nodes (tx's conformance kit runs 2 roles x 2 replicas);
#      SLURM_MIN_JOB_AGE (seconds, default 3600);
#      SLURM_NODE_MEM_MB (RealMemory of each node, default 4096);
#      SLURM_CRED_EXPIRE (seconds, default 10, at least 5; Slurm's default is 120): a
#      requeued job waits this long before it may start again;
#      SLURM_FAKE_GPUS (default 2): GPUs per node, as GRES "gpu" whose device files are
#      character devices like /dev/null under $SLURM_BASE/dev: Slurm allocates them and sets
#      CUDA_VISIBLE_DEVICES, so GPU requests can be tested; nothing can compute on them.
#      0 (or a host where mknod is not allowed) gives nodes without GPUs;
#      SLURM_ACCT=1 also runs a private mariadb + slurmdbd so that `sacct` works
#      (install with SLURM_ACCT=1 scripts/install-slurm.sh);
#      SLURM_ENFORCE_MEM=1 makes memory a consumable resource (CR_Core_Memory, 256 MB per
#      CPU by default) and holds each step to its --mem: the cgroup v1 memory controller
#      where it is writable (the step ends OUT_OF_MEMORY), else jobacct_gather's
#      OverMemoryKill (the step is killed, "exceeded memory limit");
#      SLURM_FIRST_JOB_ID (default 1): two clusters with memory cgroups share the host's
#      cgroup tree (slurm_<node>/uid_<uid>/job_<id>), so give them distinct job ids;
#      SLURM_PREEMPT_GRACE (seconds, default 5): GraceTime of partition `low`, which a job
#      of partition `high` preempts (both on the last node; PreemptMode=REQUEUE);
#      SLURM_CLUSTER_NAME (default txcluster);
#      SLURM_MAX_ARRAY_SIZE, SLURM_MAX_JOB_COUNT (default: unset, Slurm's 1001 and 10000):
#      MaxArraySize (array task ids run up to one less) and MaxJobCount (jobs slurmctld
#      holds; every array task counts as one), for tests of sweeps larger than one array.
# Ports on 127.0.0.1: SLURM_CTLD_PORT (slurmctld, default 6817), SLURMDBD_PORT (6820),
#      SLURM_MARIADB_PORT (3307), slurmd of node K: SLURMD_PORT_BASE + K (base 6830).
#      The tests start their own cluster (tx_scheduler_slurm.testing) with
#      another SLURM_BASE and other ports, so it runs beside one started by hand.
# The environment's SLURM_CONF is ignored: the clients get $SLURM_BASE/etc/slurm.conf.
set -Eeuo pipefail
# a command that fails ends the script (set -e): say which, where, with its status (not
# for one failing inside $(...), whose status the script tests itself)
trap 'tx_rc=$?; [ "$BASH_SUBSHELL" != 0 ] || log "failed (status $tx_rc) at line $LINENO: $BASH_COMMAND"' ERR
B=${SLURM_BASE:-/tmp/tx-slurm}
CTLD_PORT=${SLURM_CTLD_PORT:-6817}
DBD_PORT=${SLURMDBD_PORT:-6820}
DB_PORT=${SLURM_MARIADB_PORT:-3307}
SLURMD_BASE=${SLURMD_PORT_BASE:-6830}
CLUSTER=${SLURM_CLUSTER_NAME:-txcluster}
ACCT=${SLURM_ACCT:-0}
NODES=${SLURM_NODES:-4}
MIN_JOB_AGE=${SLURM_MIN_JOB_AGE:-3600}
NODE_MEM=${SLURM_NODE_MEM_MB:-4096}
CRED_EXPIRE=${SLURM_CRED_EXPIRE:-10}
FAKE_GPUS=${SLURM_FAKE_GPUS:-2}
ENFORCE_MEM=${SLURM_ENFORCE_MEM:-0}
FIRST_JOB_ID=${SLURM_FIRST_JOB_ID:-1}
PREEMPT_GRACE=${SLURM_PREEMPT_GRACE:-5}
MAX_ARRAY_SIZE=${SLURM_MAX_ARRAY_SIZE:-}
MAX_JOB_COUNT=${SLURM_MAX_JOB_COUNT:-}
H=$(hostname)
log() { echo "[start-slurm] $*" >&2; }

case "$FAKE_GPUS" in ''|*[!0-9]*) log "SLURM_FAKE_GPUS must be a number, got '$FAKE_GPUS'"; exit 2;; esac
case "$NODES" in ''|*[!0-9]*) log "SLURM_NODES must be a number of nodes, got '$NODES'"; exit 2;; esac
[ "$NODES" -ge 1 ] && [ "$NODES" -le 64 ] || { log "SLURM_NODES must be 1..64, got $NODES"; exit 2; }
for v in CTLD_PORT DBD_PORT DB_PORT SLURMD_BASE; do
  case "${!v}" in ''|*[!0-9]*) log "$v must be a port number, got '${!v}'"; exit 2;; esac
done
case "$FIRST_JOB_ID" in ''|*[!0-9]*|0) log "SLURM_FIRST_JOB_ID must be a job id (1 or more), got '$FIRST_JOB_ID'"; exit 2;; esac
case "$PREEMPT_GRACE" in ''|*[!0-9]*) log "SLURM_PREEMPT_GRACE must be seconds, got '$PREEMPT_GRACE'"; exit 2;; esac
for v in MAX_ARRAY_SIZE MAX_JOB_COUNT; do
  case "${!v}" in *[!0-9]*) log "SLURM_$v must be a number, got '${!v}'"; exit 2;; esac
done
for v in ACCT ENFORCE_MEM; do
  case "${!v}" in 0|1) ;; *) log "SLURM_$v must be 0 or 1, got '${!v}'"; exit 2;; esac
done
case "$CLUSTER" in ''|*[!a-z0-9_]*) log "SLURM_CLUSTER_NAME must be lowercase letters, digits or _, got '$CLUSTER'"; exit 2;; esac

missing=()
for b in slurmctld slurmd munged sinfo scontrol; do command -v "$b" >/dev/null || missing+=("$b"); done
if [ "$ACCT" = 1 ]; then
  command -v slurmdbd >/dev/null || missing+=(slurmdbd)
  command -v mariadbd >/dev/null || missing+=(mariadbd)
fi
if [ ${#missing[@]} -gt 0 ]; then
  log "missing ${missing[*]}: run scripts/install-slurm.sh first (Debian: apt-get install slurmctld slurmd slurm-client munge)"
  exit 1
fi

NODE_NAMES=$(seq -f 'node%g' 1 "$NODES")
export SLURM_CONF=$B/etc/slurm.conf
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_pid() { # pidfile: TERM, then KILL after 10 s
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

# ready: every node registered and usable (idle, allocated, mixed, planned, completing)
ready() {
  local states
  states=$(timeout 5 sinfo -h -N -p debug -o '%N %t' 2>/dev/null | sort -u) || return 1
  [ "$(echo "$states" | grep -c -E '^node[0-9]+ (idle|alloc|mix|plnd|comp|resv)$')" = "$NODES" ]
}

all_alive() {
  local n
  alive $B/run/munged.pid && alive $B/run/slurmctld.pid && alive $B/run/heartbeat.pid || return 1
  for n in $NODE_NAMES; do alive $B/run/slurmd-$n.pid || return 1; done
  [ "$ACCT" != 1 ] || alive $B/run/slurmdbd.pid
}

write_conf() { # stdout: slurm.conf
  local acct i
  local select=CR_Core gather=jobacct_gather/none freq=5 task=task/none proctrack=proctrack/linuxproc
  acct=AccountingStorageType=accounting_storage/none
  if [ "$ACCT" = 1 ]; then
    gather=jobacct_gather/linux
    acct=$(printf '%s\n' "AccountingStorageType=accounting_storage/slurmdbd" \
      "AccountingStorageHost=127.0.0.1" "AccountingStoragePort=$DBD_PORT" \
      "AccountingStoragePass=$B/run/munge.socket.2")
  fi
  if [ "$ENFORCE_MEM" = 1 ]; then
    # memory is a consumable resource and each step is held to its --mem: by the cgroup v1
    # memory controller where it can be used (the step ends OUT_OF_MEMORY), else by
    # jobacct_gather's polling (the step is killed with "exceeded memory limit")
    select=CR_Core_Memory gather=jobacct_gather/linux freq=1
    acct=$(printf '%s\n' "$acct" "DefMemPerCPU=256")
    if [ "$MEM_CGROUP" = 1 ]; then
      task=task/cgroup proctrack=proctrack/cgroup
    else
      acct=$(printf '%s\n' "$acct" "JobAcctGatherParams=OverMemoryKill")
    fi
  fi
  acct=$(printf '%s\n' "$acct" "JobAcctGatherType=$gather" "JobAcctGatherFrequency=task=$freq")
  [ -z "$MAX_ARRAY_SIZE" ] || acct=$(printf '%s\n' "$acct" "MaxArraySize=$MAX_ARRAY_SIZE")
  [ -z "$MAX_JOB_COUNT" ] || acct=$(printf '%s\n' "$acct" "MaxJobCount=$MAX_JOB_COUNT")
  cat <<CONF
ClusterName=$CLUSTER
SlurmctldHost=$H(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$B/run/munge.socket.2,cred_expire=$CRED_EXPIRE
CredType=cred/munge
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
SlurmctldPort=$CTLD_PORT
SlurmctldPidFile=$B/run/slurmctld.pid
SlurmdPidFile=$B/run/slurmd-%n.pid
SlurmctldLogFile=$B/log/slurmctld.log
SlurmdLogFile=$B/log/slurmd-%n.log
StateSaveLocation=$B/spool/ctld
SlurmdSpoolDir=$B/spool/d-%n
ProctrackType=$proctrack
TaskPlugin=$task
FirstJobId=$FIRST_JOB_ID
JobCompType=jobcomp/filetxt
JobCompLoc=$B/log/jobcomp.txt
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,bf_interval=1,bf_hetjob_immediate
SelectType=select/cons_tres
SelectTypeParameters=$select
GresTypes=gpu
MpiDefault=none
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
ReturnToService=2
MinJobAge=$MIN_JOB_AGE
KillWait=5
$acct
CONF
  local gres=""
  [ "$FAKE_GPUS" -gt 0 ] && gres=" Gres=gpu:$FAKE_GPUS"
  for i in $(seq 1 "$NODES"); do
    echo "NodeName=node$i NodeHostname=$H NodeAddr=127.0.0.1 Port=$((SLURMD_BASE + i)) CPUs=2 RealMemory=$NODE_MEM$gres Features=tx,node$i State=UNKNOWN"
  done
  # down1: shaped like the others but DOWN and never started (no slurmd; port 1, where
  # nothing listens, so slurmctld's pings fail at once): a job in partition `down` stays
  # PENDING, as on a cluster whose nodes are down
  echo "NodeName=down1 NodeHostname=$H NodeAddr=127.0.0.1 Port=1 CPUs=2 RealMemory=$NODE_MEM$gres Features=tx,down1 State=DOWN Reason=\"never started (partition down)\""
  echo "PartitionName=debug Nodes=node[1-$NODES] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO PreemptMode=OFF"
  echo "PartitionName=down Nodes=down1 MaxTime=INFINITE State=UP OverSubscribe=NO PreemptMode=OFF"
  # preemption on node$NODES alone: a job of `high` requeues a job of `low` there (SIGTERM,
  # then SIGKILL once low's GraceTime has passed); jobs of debug are never preempted
  echo "PartitionName=low Nodes=node$NODES MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=1 PreemptMode=REQUEUE GraceTime=$PREEMPT_GRACE"
  echo "PartitionName=high Nodes=node$NODES MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=2 PreemptMode=OFF"
}

start_mariadb_slurmdbd() {
  if ! alive $B/run/mariadb.pid; then
    if [ ! -d $B/db/mysql ] && ! mariadb-install-db --user=root --datadir=$B/db --auth-root-authentication-method=normal \
        > $B/log/mariadb-install.log 2>&1; then
      log "mariadb-install-db failed ($B/log/mariadb-install.log): $(tail -5 $B/log/mariadb-install.log | tr '\n' ' ')"
      exit 1
    fi
    (mariadbd --user=root --datadir=$B/db --socket=$B/run/mysql.sock --port=$DB_PORT --bind-address=127.0.0.1 \
       --pid-file=$B/run/mariadb.pid --log-error=$B/log/mariadb.log \
       --innodb-buffer-pool-size=64M --innodb-log-file-size=8M </dev/null >/dev/null 2>&1 &)
    for _ in $(seq 60); do mariadb -uroot -S $B/run/mysql.sock -e 'select 1' >/dev/null 2>&1 && break; sleep 0.5; done
    mariadb -uroot -S $B/run/mysql.sock -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm'; CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm'; GRANT ALL ON *.* TO 'slurm'@'localhost'; GRANT ALL ON *.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;"
  fi
  cat > $B/etc/slurmdbd.conf <<CONF
AuthType=auth/munge
AuthInfo=socket=$B/run/munge.socket.2
DbdHost=$H
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$B/run/slurmdbd.pid
LogFile=$B/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
CONF
  chmod 600 $B/etc/slurmdbd.conf
  if ! alive $B/run/slurmdbd.pid; then
    slurmdbd   # reads the slurmdbd.conf next to $SLURM_CONF
    for _ in $(seq 60); do (exec 3<>/dev/tcp/127.0.0.1/$DBD_PORT) 2>/dev/null && break; sleep 0.5; done
  fi
}

# Slurm's backfill scheduler, which alone starts heterogeneous jobs, runs only after some
# job, node or partition changed. A busy cluster changes all the time; this idle one would
# leave a requeued job pending for minutes once its begin time has passed. The heartbeat
# "changes" the partition every 2 s, as activity on a real cluster would.
start_heartbeat() {
  alive $B/run/heartbeat.pid && return 0
  setsid bash -c 'while sleep 2; do timeout 5 scontrol update PartitionName=debug State=UP; done' \
    </dev/null >/dev/null 2>&1 &
  echo $! > $B/run/heartbeat.pid
}

# GRES "gpu" backed by character devices (same numbers as /dev/null): gres/gpu accepts only
# character or block devices. Sets FAKE_GPUS=0 where mknod is not allowed.
make_fake_gpus() {
  local i
  mkdir -p $B/etc
  [ "$FAKE_GPUS" -gt 0 ] || { rm -f $B/etc/gres.conf; return 0; }
  mkdir -p $B/dev
  for i in $(seq 0 $((FAKE_GPUS - 1))); do
    [ -c $B/dev/gpu$i ] && continue
    rm -f $B/dev/gpu$i
    if ! mknod $B/dev/gpu$i c 1 3 2>/dev/null; then
      log "mknod not allowed here: nodes get no fake GPUs"
      FAKE_GPUS=0; rm -f $B/etc/gres.conf; return 0
    fi
  done
  printf 'AutoDetect=off\nName=gpu File=%s/dev/gpu[0-%d]\n' "$B" $((FAKE_GPUS - 1)) > $B/etc/gres.conf
}

start_all() {
  local n conf
  mkdir -p $B/{etc,run,log,spool/ctld,munge,db}
  for n in $NODE_NAMES; do mkdir -p $B/spool/d-$n; done
  chmod 700 $B/munge

  # munge with a private key and socket: never touches a system munged
  if ! alive $B/run/munged.pid; then
    [ -f $B/munge/munge.key ] || { dd if=/dev/urandom of=$B/munge/munge.key bs=1 count=1024 status=none; chmod 400 $B/munge/munge.key; }
    munged --force --socket=$B/run/munge.socket.2 --key-file=$B/munge/munge.key \
      --pid-file=$B/run/munged.pid --log-file=$B/log/munged.log --seed-file=$B/munge/munged.seed
  fi

  conf=$(write_conf)
  if [ "$conf" != "$(cat $SLURM_CONF 2>/dev/null)" ]; then
    if alive $B/run/slurmctld.pid; then  # node or daemon settings changed: restart
      log "configuration changed: restarting slurmctld and slurmd"
      for f in $B/run/slurmd-*.pid; do stop_pid "$f"; done
      stop_pid $B/run/slurmctld.pid
    fi
    echo "$conf" > $SLURM_CONF
  fi
  [ "$ACCT" != 1 ] || start_mariadb_slurmdbd

  # a pid file left by a slurmctld that ended (SIGTERM, a crash) names a dead process: gone
  # before the new one daemonizes, so that the wait below never reads it as the new one's end
  alive $B/run/slurmctld.pid || { rm -f $B/run/slurmctld.pid; slurmctld -f $SLURM_CONF; }
  if [ "$ACCT" = 1 ]; then
    for _ in $(seq 20); do timeout 5 sinfo -h >/dev/null 2>&1 && break; sleep 0.5; done
    timeout 20 sacctmgr -i add cluster "$CLUSTER" >/dev/null 2>&1 || true
  fi
  for n in $NODE_NAMES; do alive $B/run/slurmd-$n.pid || slurmd -f $SLURM_CONF -N $n; done
  start_heartbeat
}

# SLURM_ENFORCE_MEM=1: can slurmd use the cgroup v1 memory controller (cgroup.conf)?
MEM_CGROUP=0
write_cgroup_conf() {
  rm -f $B/etc/cgroup.conf
  [ "$ENFORCE_MEM" = 1 ] || return 0
  local probe=/sys/fs/cgroup/memory/tx-slurm-probe-$$
  if [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ] && mkdir $probe 2>/dev/null; then
    rmdir $probe
    MEM_CGROUP=1
    mkdir -p $B/etc
    printf '%s\n' CgroupPlugin=cgroup/v1 CgroupMountpoint=/sys/fs/cgroup CgroupAutomount=no \
      ConstrainRAMSpace=yes ConstrainSwapSpace=no > $B/etc/cgroup.conf
  else
    log "no writable cgroup v1 memory controller: memory is enforced by jobacct_gather (OverMemoryKill)"
  fi
}

make_fake_gpus
write_cgroup_conf
if all_alive && [ "$(write_conf)" = "$(cat $SLURM_CONF 2>/dev/null)" ]; then
  log "already running"
else
  start_all
fi

for _ in $(seq 120); do
  # ended: its pid file names a dead process (not yet written: still starting, waited for)
  [ ! -f $B/run/slurmctld.pid ] || alive $B/run/slurmctld.pid || break
  if ready; then
    log "up: $(timeout 5 sinfo -h -N -o '%N %t' | tr '\n' ' ')(SLURM_CONF=$SLURM_CONF)"
    echo "export SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  # a node left DOWN or DRAINED by an earlier unclean stop: bring it back once it answers
  for n in $(timeout 5 sinfo -h -N -p debug -t down,drain -o '%N' 2>/dev/null | sort -u); do
    timeout 5 scontrol update nodename="$n" state=resume >/dev/null 2>&1 || true
  done
  sleep 0.25
done
if [ -f $B/run/slurmctld.pid ] && ! alive $B/run/slurmctld.pid; then
  log "slurmctld ended while the cluster started (its log below)"
else
  log "cluster not ready in 30 s"
fi
timeout 5 sinfo -N >&2 || true
tail -20 $B/log/slurmctld.log >&2 || true
exit 1
