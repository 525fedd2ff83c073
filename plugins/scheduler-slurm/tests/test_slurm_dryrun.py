"""Dryrun of the slurm scheduler, offline: the sbatch command and batch script for one and
many roles and replicas, resources, every run option, bad input, and quoting (checked by
running the generated shell words with the real bash, without Slurm)."""
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from tx.specs import AppDef, BindMount, InvalidRunConfigException, Resource, Role
from tx_scheduler_slurm._cluster import ClusterInfo
from tx_scheduler_slurm._parse import Partition
from tx_scheduler_slurm.request import LAUNCHER, SlurmBatchRequest
from tx_scheduler_slurm.scheduler import SlurmScheduler, create_scheduler

CLUSTER = ClusterInfo(
    partitions={
        "debug": Partition("debug", mem_mb=4096, nodes=8, default=True),
        "tiny": Partition("tiny", mem_mb=1, nodes=8),  # reports RealMemory=1 (ParallelCluster)
        "pair": Partition("pair", mem_mb=4096, nodes=2),
    },
    version=(22, 5),
)


@pytest.fixture
def sched() -> SlurmScheduler:
    return create_scheduler("tx", cluster=CLUSTER)


def res(cpu: int = 2, gpu: int = 0, mem: int = 1024) -> Resource:
    return Resource(cpu=cpu, gpu=gpu, memMB=mem)


def trainer(replicas: int = 1, **kw: Any) -> Role:
    kw.setdefault("resource", res())
    return Role("trainer", image="/code", entrypoint="python3", args=["train.py", "--rank", "${replica_id}"],
                env={"RUN": "${app_id}-r${replica_id}", "MASTER": "${rank0_env}", "ROOT": "${img_root}"},
                num_replicas=replicas, **kw)


def request(sched: SlurmScheduler, app: AppDef, cfg: Optional[Dict[str, Any]] = None) -> SlurmBatchRequest:
    return sched.submit_dryrun(app, cfg or {}).request


def sbatch_lines(script: str) -> List[str]:
    return [ln for ln in script.splitlines() if ln.startswith("#SBATCH")]


def srun_groups(script: str) -> List[str]:
    start = script.index("\nsrun ") + 6
    srun = script[start: script.index("\ntx_rc=$?", start)]
    return srun.split(" \\\n  : ")


def test_one_role_one_replica(sched: SlurmScheduler, tmp_path: Path) -> None:
    req = request(sched, AppDef("one", roles=[trainer()]), {"job_dir": str(tmp_path / "j")})
    assert req.cmd == ["sbatch", "--parsable", f"--chdir={tmp_path / 'j'}", "--open-mode=append", "--comment=tx-app:one"]
    assert req.job_dir == str(tmp_path / "j")
    assert req.max_retries == 0
    script = req.materialize()
    assert script.startswith("#!/bin/bash\n")
    assert sbatch_lines(script) == [
        "#SBATCH --job-name=one@trainer-0 --requeue --ntasks-per-node=1 --cpus-per-task=2 --mem=1024"
    ]
    (group,) = srun_groups(script)
    assert group.startswith(
        '--output=slurm-"$SLURM_JOB_ID"-trainer-0.out --error=slurm-"$SLURM_JOB_ID"-trainer-0.err '
        "--open-mode=append --wait=60 --kill-on-bad-exit=1 "
        'bash -c "$TX_LAUNCHER" tx-launcher slurm-"$SLURM_JOB_ID"-trainer-0.exitcode 13 '
    )
    assert group.endswith("python3 train.py --rank 0")
    # macros: app_id from the shell, rank0_env names TX_RANK0_HOST, img_root is the image
    assert 'RUN="$SLURM_JOB_ID"-r0' in group
    assert "MASTER=TX_RANK0_HOST ROOT=/code" in group
    assert 'TX_APP_ID="$SLURM_JOB_ID" TX_ROLE_NAME=trainer TX_REPLICA_ID=0 TX_ROLE_IDX=0' in group
    # the replica environment contract under TorchX's names too
    assert 'TORCHX_APP_ID="$SLURM_JOB_ID" TORCHX_ROLE_NAME=trainer TORCHX_REPLICA_IDX=0' in group
    assert 'export TORCHX_RANK0_HOST="$TX_RANK0_HOST"' in script
    # the rank-0 address is the NodeAddr of het group 0's first node
    assert 'scontrol show hostnames "${SLURM_JOB_NODELIST_HET_GROUP_0:-$SLURM_JOB_NODELIST}"' in script
    assert "grep -o 'NodeAddr=[^ ]*'" in script
    assert 'export TX_RANK0_HOST="${tx_rank0_addr:-$tx_rank0_node}"' in script


def test_many_roles_and_replicas(sched: SlurmScheduler) -> None:
    reader = Role("reader", image="/data", entrypoint="cat", args=["/data/${replica_id}.txt"],
                  num_replicas=2, resource=res(cpu=1, mem=512))
    req = request(sched, AppDef("many", roles=[trainer(3), reader]))
    assert list(req.replicas) == ["trainer-0", "trainer-1", "trainer-2", "reader-0", "reader-1"]
    script = req.materialize()
    lines = [ln for ln in script.splitlines() if ln.startswith("#SBATCH")]
    assert lines[1::2] == ["#SBATCH hetjob"] * 4
    names = [re.search(r"--job-name=(\S+)", ln)[1] for ln in lines[0::2]]
    assert names == ["many@trainer-0", "many@trainer-1", "many@trainer-2", "many@reader-0", "many@reader-1"]
    assert all("--cpus-per-task=1 --mem=512" in ln for ln in lines[6::2])
    groups = srun_groups(script)
    assert len(groups) == 5 and script.count("\nsrun ") == 1
    for i, group in enumerate(groups[:3]):
        assert f'--output=slurm-"$SLURM_JOB_ID"-trainer-{i}.out' in group
        assert f'--error=slurm-"$SLURM_JOB_ID"-trainer-{i}.err' in group
        assert f"TX_REPLICA_ID={i} " in group and group.endswith(f"--rank {i}")
    assert groups[4].endswith("cat /data/1.txt") and "TX_ROLE_NAME=reader TX_REPLICA_ID=1" in groups[4]
    assert req.max_retries == 0


def test_retries_take_the_smallest_max_retries(sched: SlurmScheduler) -> None:
    a = trainer(max_retries=3)
    b = Role("b", entrypoint="true", max_retries=2, resource=res())
    req = request(sched, AppDef("r", roles=[a, b]))
    script = req.materialize()
    assert req.max_retries == 2 and "export TX_MAX_RETRIES=2" in script
    assert '[ "$tx_user" -lt "$TX_MAX_RETRIES" ]' in script
    assert 'timeout 60 scontrol requeue "$SLURM_JOB_ID"' in script
    assert all("--requeue" in ln for ln in sbatch_lines(script) if "job-name" in ln)
    with pytest.raises(ValueError, match="max_retries=2 but run option requeue=False"):
        request(sched, AppDef("r", roles=[a, b]), {"requeue": False})
    forced = request(sched, AppDef("r", roles=[trainer()]), {"requeue": True}).materialize()
    assert "--requeue " in sbatch_lines(forced)[0]


def test_infra_retries_requeue_the_job_without_spending_max_retries(sched: SlurmScheduler) -> None:
    """infra_retries (default 3) alone makes the job requeue-able (Slurm requeues it after a
    node failure or preemption); the script counts those restarts apart from the user's."""
    script = request(sched, AppDef("i", roles=[trainer()])).materialize()
    assert "--requeue " in sbatch_lines(script)[0]
    assert "export TX_MAX_RETRIES=0\nexport TX_INFRA_RETRIES=3\n" in script
    assert 'tx_infra=$((tx_attempt - tx_user))' in script
    none = request(sched, AppDef("i", roles=[trainer()]), {"infra_retries": 0})
    assert none.infra_retries == 0 and "--no-requeue " in sbatch_lines(none.materialize())[0]
    with pytest.raises(InvalidRunConfigException, match="infra_retries must be an integer >= 0, got -1"):
        sched.submit_dryrun(AppDef("i", roles=[trainer()]), {"infra_retries": -1})


def test_resources(sched: SlurmScheduler) -> None:
    gpu = trainer(2, resource=res(cpu=8, gpu=4, mem=8192))
    line = sbatch_lines(request(sched, AppDef("g", roles=[gpu])).materialize())[0]
    assert "--cpus-per-task=8 --mem=8192 --gpus-per-task=4 --ntasks=1" in line
    new = create_scheduler("tx", cluster=ClusterInfo(CLUSTER.partitions, version=(24, 11)))
    line = sbatch_lines(request(new, AppDef("g", roles=[gpu])).materialize())[0]
    assert "--gpus-per-node=4" in line and "gpus-per-task" not in line and "--ntasks=1" not in line
    # a role without resources (NULL_RESOURCE) leaves them to Slurm's defaults
    bare = Role("bare", entrypoint="true")
    line = sbatch_lines(request(sched, AppDef("b", roles=[bare])).materialize())[0]
    assert line == "#SBATCH --job-name=b@bare-0 --requeue --ntasks-per-node=1"


def test_mem_is_left_out_where_the_partition_reports_too_little(sched: SlurmScheduler) -> None:
    line = sbatch_lines(request(sched, AppDef("m", roles=[trainer()]), {"partition": "tiny"}).materialize())[0]
    assert "--mem" not in line and "--cpus-per-task=2" in line and "--partition=tiny" in line
    line = sbatch_lines(request(sched, AppDef("m", roles=[trainer()])).materialize())[0]
    assert "--mem=1024" in line  # the default partition (debug) reports 4096 MB


def test_every_run_option(sched: SlurmScheduler, tmp_path: Path) -> None:
    cfg = {
        "partition": "debug", "time": "1-02:03:04", "account": "ml-team", "comment": "nightly run, v2",
        "constraint": "a100&ib", "mail-user": "me@example.com", "mail-type": "END,FAIL",
        "job_dir": str(tmp_path / "jobs" / "x"), "qos": "high", "exclusive": True, "nodelist": "n1,n2",
        "exclude": "n3", "gres": "nvme:1", "reservation": "maint", "dependency": "afterok:12:13,afterany:14",
        "signal": "USR1@120", "requeue": False, "infra_retries": 2,
    }
    assert sorted(k for k, _ in sched.run_opts()) == sorted(cfg)
    req = request(sched, AppDef("o", roles=[trainer(2)]), cfg)
    assert req.cmd == [
        "sbatch", "--parsable", f"--chdir={tmp_path / 'jobs' / 'x'}", "--open-mode=append",
        "--comment=tx-app:o; nightly run, v2", "--account=ml-team", "--mail-user=me@example.com",
        "--mail-type=END,FAIL", "--dependency=afterok:12:13,afterany:14", "--signal=USR1@120",
    ]
    lines = [ln for ln in sbatch_lines(req.materialize()) if "job-name" in ln]
    for k, line in enumerate(lines):
        assert line.startswith(f"#SBATCH --job-name=o@trainer-{k} --no-requeue --ntasks-per-node=1 --exclusive ")
        assert line.endswith("--partition=debug --time=1-02:03:04 --constraint=a100&ib --qos=high "
                             f"--exclude=n3 --gres=nvme:1 --reservation=maint --nodelist=n{k + 1}")
    text = str(sched.submit_dryrun(AppDef("o", roles=[trainer(2)]), cfg))
    assert text.startswith("sbatch --parsable") and "'--comment=tx-app:o; nightly run, v2'" in text.splitlines()[0]
    assert "# SBATCH_SCRIPT" in text and "#SBATCH hetjob" in text
    # the job's tx.distributed.preempted() is armed for the signal, and knows its grace
    for r in req.replicas.values():
        assert (r.env["TX_PREEMPT_SIGNAL"], r.env["TX_PREEMPT_GRACE"]) == ("USR1", "120"), r.env
    # every launcher passes it on and records it; B: (the batch shell only) becomes the steps'
    assert "export TX_WARN_SIGNAL=USR1 TX_WARN_FILE=" in req.materialize()
    assert "--signal=R:USR1@90" in request(sched, AppDef("o", roles=[trainer()]), {"signal": "RB:10@90"}).cmd
    assert "export TX_WARN_SIGNAL" not in request(sched, AppDef("o", roles=[trainer()])).materialize()


@pytest.mark.parametrize("given, env", [
    (None, {}), ("B:USR1@90", {"TX_PREEMPT_SIGNAL": "USR1", "TX_PREEMPT_GRACE": "90"}),
    ("SIGUSR2", {"TX_PREEMPT_SIGNAL": "USR2", "TX_PREEMPT_GRACE": "60"}),  # sbatch's default: 60 s
])
def test_signal_sets_the_preemption_env_and_a_roles_own_wins(sched: SlurmScheduler, given, env) -> None:
    req = request(sched, AppDef("o", roles=[trainer()]), {} if given is None else {"signal": given})
    got = {k: v for k, v in req.replicas["trainer-0"].env.items() if k.startswith("TX_PREEMPT_")}
    assert got == env
    own = trainer()
    own.env["TX_PREEMPT_GRACE"] = "5"
    req = request(sched, AppDef("o", roles=[own]), {"signal": "USR1@120"})
    assert req.replicas["trainer-0"].env["TX_PREEMPT_GRACE"] == "5"


def test_job_dir_defaults_to_the_current_directory(sched: SlurmScheduler, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    req = request(sched, AppDef("c", roles=[trainer()]))
    assert req.job_dir is None and f"--chdir={tmp_path}" in req.cmd
    req = request(sched, AppDef("c", roles=[trainer()]), {"job_dir": "rel/dir"})
    assert f"--chdir={tmp_path / 'rel' / 'dir'}" in req.cmd


def test_dryrun_is_deterministic_and_offline(sched: SlurmScheduler) -> None:
    app = AppDef("d", roles=[trainer(2)])
    assert str(sched.submit_dryrun(app, {})) == str(sched.submit_dryrun(app, {}))


@pytest.mark.parametrize("cfg, key", [
    ({"time": "ten minutes"}, "time"),
    ({"time": "1:2:3:4"}, "time"),
    ({"mail-type": "END,SOMETIMES"}, "mail-type"),
    ({"partition": "a b"}, "partition"),
    ({"constraint": "x#y"}, "constraint"),
    ({"qos": ""}, "qos"),
    ({"comment": "two\nlines"}, "comment"),
    ({"job_dir": " "}, "job_dir"),
    ({"partition": "nosuch"}, "partition"),
    ({"time": 10}, "time"),
])
def test_bad_run_options(sched: SlurmScheduler, cfg: Dict[str, Any], key: str) -> None:
    with pytest.raises(InvalidRunConfigException) as e:
        sched.submit_dryrun(AppDef("b", roles=[trainer()]), cfg)
    assert e.value.cfg_key == key and "\n" not in str(e.value), str(e.value)


def test_good_time_formats(sched: SlurmScheduler) -> None:
    for t in ("10", "10:30", "1:00:00", "2-0", "2-1:30", "2-1:30:00", "UNLIMITED"):
        sched.submit_dryrun(AppDef("t", roles=[trainer()]), {"time": t})


def test_an_app_larger_than_the_partition_is_refused(sched: SlurmScheduler) -> None:
    with pytest.raises(ValueError, match=r"needs 3 nodes \(trainer: 3\) but partition 'pair' has 2"):
        sched.submit_dryrun(AppDef("big", roles=[trainer(3)]), {"partition": "pair"})
    with pytest.raises(ValueError, match=r"needs 9 nodes \(trainer: 3, b: 6\) but partition 'debug' has 8"):
        sched.submit_dryrun(AppDef("big", roles=[trainer(3), Role("b", entrypoint="x", num_replicas=6)]), {})


def test_partition_lists(sched: SlurmScheduler) -> None:
    """sbatch takes several partitions (``a,b``): each must exist, the largest bounds the
    replicas, and one that reports too little memory drops ``--mem``."""
    line = sbatch_lines(request(sched, AppDef("p", roles=[trainer(3)]), {"partition": "pair,debug"}).materialize())[0]
    assert "--partition=pair,debug" in line and "--mem=1024" in line
    line = sbatch_lines(request(sched, AppDef("p", roles=[trainer()]), {"partition": "debug,tiny"}).materialize())[0]
    assert "--mem" not in line
    with pytest.raises(InvalidRunConfigException, match="no partition 'nosuch' on this cluster; partitions: debug, pair, tiny"):
        sched.submit_dryrun(AppDef("p", roles=[trainer()]), {"partition": "debug,nosuch"})


@pytest.mark.parametrize("role, match", [
    (Role("a b", entrypoint="x"), "role name 'a b'"),
    (Role("../up", entrypoint="x"), "role name '../up'"),
    (Role("r", entrypoint="x", env={"A-B": "1"}), "env name 'A-B'"),
    (Role("r", entrypoint="x", mounts=[BindMount("/a", "/b")]), "supports no mounts"),
])
def test_bad_apps(sched: SlurmScheduler, role: Role, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        sched.submit_dryrun(AppDef("bad", roles=[role]), {})


# -- quoting: run the generated words with the real bash --------------------------------

NASTY = [":", "+:", "++:", "a;b", "$(touch pwned)", "`id`", "'", '"', "it's \"q\"", "l1\nl2", "",
         " sp ", "\\", "*", "$HOME", "${app_id}/x", "-c", "--", "é ✓", "a,b", "%j %t"]


def test_quoting_round_trips_through_bash(sched: SlurmScheduler, tmp_path: Path) -> None:
    """Each srun group's words, run as srun would run them (after bash expanded them in the
    batch script), give the program exactly the args and env the app asked for."""
    prog = "import json,os,sys; print(json.dumps([sys.argv[1:], {k: os.environ.get(k) for k in ('V', 'W', 'TX_APP_ID', 'TX_ROLE_NAME', 'TX_REPLICA_ID')}]))"
    role = Role("q", entrypoint=sys.executable, args=["-c", prog, *NASTY],
                env={"V": "a,b c;$(x)\n'\"%", "W": "${app_id}"}, num_replicas=2)
    req = request(sched, AppDef("q", roles=[role]))
    for k, rep in enumerate(req.replicas.values()):
        words = rep.srun_words()
        n_opts = len(rep.srun_opts)
        snippet = (f"SLURM_JOB_ID=4242\nTX_LAUNCHER={shlex.quote(LAUNCHER)}\n"
                   f"set -- {' '.join(words)}\nshift {n_opts}\n\"$@\"\n")
        p = subprocess.run(["bash", "-c", snippet], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        argv, env = json.loads(p.stdout)
        assert argv == [a.replace("${app_id}", "4242") for a in NASTY]
        assert env == {"V": "a,b c;$(x)\n'\"%", "W": "4242", "TX_APP_ID": "4242", "TX_ROLE_NAME": "q",
                       "TX_REPLICA_ID": str(k)}
        assert (tmp_path / f"slurm-4242-q-{k}.exitcode").read_text() == "0 0\n"
    assert not (tmp_path / "pwned").exists()


def test_launcher_records_failures_and_signals(tmp_path: Path) -> None:
    def launch(*cmd: str, env: Optional[Dict[str, str]] = None) -> int:
        args = ["bash", "-c", LAUNCHER, "tx-launcher", "x.exitcode", "0", *cmd]
        return subprocess.run(args, cwd=tmp_path, env={**os.environ, **(env or {})}, timeout=60).returncode

    assert launch("sh", "-c", "exit 3", env={"SLURM_RESTART_COUNT": "2"}) == 3
    assert (tmp_path / "x.exitcode").read_text() == "2 3\n"
    assert launch("sh", "-c", "kill -TERM $$") == 143
    assert (tmp_path / "x.exitcode").read_text() == "0 143\n"
    assert launch("no-such-program-tx") == 127
    assert (tmp_path / "x.exitcode").read_text() == "0 127\n"
    assert launch("grep", "-qx", "0 running", "x.exitcode") == 0  # while the program runs


def test_batch_script_records_the_replicas_slurm_terminated(sched: SlurmScheduler, tmp_path: Path) -> None:
    """After srun, when a replica failed: a launcher that started (``0 running``) and never
    recorded was SIGKILLed by Slurm after KillWait (it traps SIGTERM): ``0 137 slurm``; no
    record of this attempt (SIGTERM before the launcher ran): ``0 143 slurm``. Without a
    failed replica nothing is written. A launcher's leftover ``.new`` record is removed."""
    req = request(sched, AppDef("t", roles=[trainer(replicas=4)]))
    snippet = f"SLURM_JOB_ID=4242\ntx_attempt=1\n{req._record_terminated()}\n"
    files = [tmp_path / f"slurm-4242-trainer-{k}.exitcode" for k in range(4)]

    def run(*before: Optional[str]) -> List[Optional[str]]:
        for f, text in zip(files, before):
            f.unlink(missing_ok=True)
            if text is not None:
                f.write_text(text)
        subprocess.run(["bash", "-c", snippet], cwd=tmp_path, check=True, timeout=60)
        return [f.read_text() if f.exists() else None for f in files]

    assert run("1 running\n", "1 3\n", "0 3\n", None) == ["1 137 slurm\n", "1 3\n", "1 143 slurm\n", "1 143 slurm\n"]
    assert run("1 running\n", "1 0\n", "0 3\n", None) == ["1 running\n", "1 0\n", "0 3\n", None]
    # a launcher SIGKILLed between writing its last record beside the file and renaming it
    # (test_slurm_hardening's strace test) left a .new: its record stays 'running', the
    # batch script records the SIGKILL and removes the .new; every record replaces a file whole
    (tmp_path / "slurm-4242-trainer-0.exitcode.new").write_text("1 0\n")
    assert run("1 running\n", "1 3\n", "1 0\n", "1 0\n") == ["1 137 slurm\n", "1 3\n", "1 0\n", "1 0\n"]
    assert sorted(f.name for f in tmp_path.iterdir()) == [f.name for f in files]


def test_app_name_in_job_names_and_comment(sched: SlurmScheduler) -> None:
    """Any app name a user types reaches Slurm: cut to safe characters in the job names,
    whole in the comment (the marker tx list looks for)."""
    req = request(sched, AppDef("Über run (exp)/日本語", roles=[trainer()]))
    assert "--job-name=_ber_run__exp_____@trainer-0 " in sbatch_lines(req.materialize())[0]
    assert "--comment=tx-app:Über run (exp)/日本語" in req.cmd
    long = request(sched, AppDef("x" * 300, roles=[trainer()]))
    assert f"--job-name={'x' * 64}@trainer-0 " in sbatch_lines(long.materialize())[0]


@pytest.mark.parametrize("cfg, match", [
    ({"signal": "USR1 now"}, "'signal' must be SIG@SECONDS"),
    ({"signal": "TERM@60"}, "SIGTERM cannot be the warning"),
    ({"dependency": "after 12"}, "'dependency' must be"),
    ({"time": "99999999999"}, "more than 365 days"),
    ({"time": "3-00:00:00", "partition": "short"}, "allows at most 1440 minutes"),
    ({"nodelist": "n1"}, "names 1 node.s. but app 'f' has 2 replica"),
])
def test_bad_run_options_are_one_line_errors(cfg: Dict[str, Any], match: str) -> None:
    cluster = ClusterInfo({**CLUSTER.partitions, "short": Partition("short", 4096, 8, cpus=4, max_time_min=1440,
                                                                     max_mem_mb=4096)})
    sched = create_scheduler("tx", cluster=cluster)
    with pytest.raises((InvalidRunConfigException, ValueError), match=match):
        sched.submit_dryrun(AppDef("f", roles=[trainer(2)]), cfg)


def test_dryrun_checks_cpus_and_memory_against_the_partition() -> None:
    cluster = ClusterInfo({"short": Partition("short", 4096, 8, default=True, cpus=4, max_time_min=1440,
                                              max_mem_mb=8192)})
    sched = create_scheduler("tx", cluster=cluster)
    with pytest.raises(ValueError, match="asks for 1000 CPUs per replica but the nodes of partition short have at most 4"):
        sched.submit_dryrun(AppDef("c", roles=[trainer(resource=res(cpu=1000))]), {})
    with pytest.raises(ValueError, match="asks for 9000 MB per replica .* at most 8192 MB"):
        sched.submit_dryrun(AppDef("c", roles=[trainer(resource=res(cpu=4, mem=9000))]), {})
    sched.submit_dryrun(AppDef("c", roles=[trainer(resource=res(cpu=4, mem=8192))]), {"time": "1-00:00:00"})
