#!/usr/bin/env bash
# Start a private two-node Slurm cluster on 127.0.0.1: munged, slurmctld and two slurmd
# (`slurmd -N node1`, `slurmd -N node2`), all state under $SLURM_BASE. Needs root and the
# Debian packages from scripts/install-slurm.sh.
#
#   eval "$(scripts/start-slurm.sh)"      # prints only `export SLURM_CONF=...` on stdout
#
# Idempotent: when the cluster is already up it only prints the export line. Returns once
# `sinfo` shows both nodes idle (a few seconds), or exits 1 with the controller's log tail.
#
# The cluster is shaped like many real ones, on purpose:
# * NodeName (node1, node2) is not a resolvable host name; NodeHostname is this host and
#   NodeAddr=127.0.0.1, so a job that passes `node1` to another program as an address fails
#   and a scheduler must resolve the node's NodeAddr (`scontrol show node`).
# * no accounting (sacct fails); finished jobs stay visible to `scontrol show job` for
#   MinJobAge seconds and are appended to jobcomp/filetxt ($SLURM_BASE/log/jobcomp.txt).
#
# Env: SLURM_BASE (default /tmp/tx-slurm); SLURM_MIN_JOB_AGE (seconds, default 3600);
#      SLURM_NODE_MEM_MB (RealMemory of each node, default 4096);
#      SLURM_ACCT=1 also runs a private mariadb + slurmdbd so that `sacct` works
#      (install with SLURM_ACCT=1 scripts/install-slurm.sh).
set -euo pipefail
B=${SLURM_BASE:-/tmp/tx-slurm}
ACCT=${SLURM_ACCT:-0}
MIN_JOB_AGE=${SLURM_MIN_JOB_AGE:-3600}
NODE_MEM=${SLURM_NODE_MEM_MB:-4096}
H=$(hostname)
log() { echo "[start-slurm] $*" >&2; }

missing=()
for b in slurmctld slurmd munged sinfo scontrol; do command -v "$b" >/dev/null || missing+=("$b"); done
[ "$ACCT" = 1 ] && { command -v slurmdbd >/dev/null || missing+=(slurmdbd); command -v mariadbd >/dev/null || missing+=(mariadbd); }
if [ ${#missing[@]} -gt 0 ]; then
  log "missing ${missing[*]}: run scripts/install-slurm.sh first (Debian: apt-get install slurmctld slurmd slurm-client munge)"
  exit 1
fi

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
export SLURM_CONF=$B/etc/slurm.conf
ready() {
  [ "$(timeout 5 sinfo -h -p debug -o '%t' 2>/dev/null | sort -u)" = idle ] &&
    [ "$(timeout 5 sinfo -h -N -o '%N' 2>/dev/null | sort -u | wc -l)" = 2 ]
}
if alive $B/run/slurmctld.pid && alive $B/run/slurmd-node1.pid && alive $B/run/slurmd-node2.pid \
   && { [ "$ACCT" != 1 ] || alive $B/run/slurmdbd.pid; } && timeout 5 sinfo -h >/dev/null 2>&1; then
  log "already running"; echo "export SLURM_CONF=$SLURM_CONF"; exit 0
fi

mkdir -p $B/{etc,run,log,spool/ctld,spool/d-node1,spool/d-node2,munge,db}
chmod 700 $B/munge

# munge with a private key and socket: never touches a system munged
if ! alive $B/run/munged.pid; then
  [ -f $B/munge/munge.key ] || { dd if=/dev/urandom of=$B/munge/munge.key bs=1 count=1024 status=none; chmod 400 $B/munge/munge.key; }
  munged --force --socket=$B/run/munge.socket.2 --key-file=$B/munge/munge.key \
    --pid-file=$B/run/munged.pid --log-file=$B/log/munged.log --seed-file=$B/munge/munged.seed
fi

ACCT_CONF="AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none"
if [ "$ACCT" = 1 ]; then
  ACCT_CONF="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6820
AccountingStoragePass=$B/run/munge.socket.2
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=5"
fi

cat > $B/etc/slurm.conf <<CONF
ClusterName=txcluster
SlurmctldHost=$H(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$B/run/munge.socket.2
CredType=cred/munge
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
SlurmctldPort=6817
SlurmctldPidFile=$B/run/slurmctld.pid
SlurmdPidFile=$B/run/slurmd-%n.pid
SlurmctldLogFile=$B/log/slurmctld.log
SlurmdLogFile=$B/log/slurmd-%n.log
StateSaveLocation=$B/spool/ctld
SlurmdSpoolDir=$B/spool/d-%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobCompType=jobcomp/filetxt
JobCompLoc=$B/log/jobcomp.txt
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=$MIN_JOB_AGE
KillWait=5
$ACCT_CONF
NodeName=node1 NodeHostname=$H NodeAddr=127.0.0.1 Port=6818 CPUs=2 RealMemory=$NODE_MEM State=UNKNOWN
NodeName=node2 NodeHostname=$H NodeAddr=127.0.0.1 Port=6819 CPUs=2 RealMemory=$NODE_MEM State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF

if [ "$ACCT" = 1 ]; then
  # private mariadb (unix socket + 127.0.0.1:3307), then slurmdbd on 6820
  if ! alive $B/run/mariadb.pid; then
    [ -d $B/db/mysql ] || mariadb-install-db --user=root --datadir=$B/db --auth-root-authentication-method=normal >/dev/null 2>&1
    (mariadbd --user=root --datadir=$B/db --socket=$B/run/mysql.sock --port=3307 --bind-address=127.0.0.1 \
       --pid-file=$B/run/mariadb.pid --log-error=$B/log/mariadb.log >/dev/null 2>&1 &)
    for _ in $(seq 60); do mariadb -uroot -S $B/run/mysql.sock -e 'select 1' >/dev/null 2>&1 && break; sleep 0.5; done
    mariadb -uroot -S $B/run/mysql.sock -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm'; CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm'; GRANT ALL ON *.* TO 'slurm'@'localhost'; GRANT ALL ON *.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;"
  fi
  cat > $B/etc/slurmdbd.conf <<CONF
AuthType=auth/munge
AuthInfo=socket=$B/run/munge.socket.2
DbdHost=$H
DbdAddr=127.0.0.1
DbdPort=6820
SlurmUser=root
PidFile=$B/run/slurmdbd.pid
LogFile=$B/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=3307
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
CONF
  chmod 600 $B/etc/slurmdbd.conf
  if ! alive $B/run/slurmdbd.pid; then
    slurmdbd   # reads the slurmdbd.conf next to $SLURM_CONF
    for _ in $(seq 60); do (exec 3<>/dev/tcp/127.0.0.1/6820) 2>/dev/null && break; sleep 0.5; done
  fi
fi

if alive $B/run/slurmctld.pid; then
  timeout 10 scontrol reconfigure >/dev/null 2>&1 || true
else
  slurmctld -f $SLURM_CONF
fi
if [ "$ACCT" = 1 ]; then
  for _ in $(seq 20); do timeout 5 sinfo -h >/dev/null 2>&1 && break; sleep 0.5; done
  timeout 20 sacctmgr -i add cluster txcluster >/dev/null 2>&1 || true
fi
for n in node1 node2; do alive $B/run/slurmd-$n.pid || slurmd -f $SLURM_CONF -N $n; done

for _ in $(seq 120); do
  alive $B/run/slurmctld.pid || break
  if ready; then
    log "up: $(timeout 5 sinfo -h -N -o '%N %t' | tr '\n' ' ')(SLURM_CONF=$SLURM_CONF)"
    echo "export SLURM_CONF=$SLURM_CONF"; exit 0
  fi
  # a node left DOWN by an earlier unclean stop comes back on its own (ReturnToService=2)
  # only once it registers; nudge nodes that registered but stay down
  timeout 5 scontrol update nodename=node[1-2] state=resume >/dev/null 2>&1 || true
  sleep 0.25
done
log "cluster did not become idle in 30 s"; timeout 5 sinfo -N >&2 || true
tail -20 $B/log/slurmctld.log >&2 || true
exit 1
