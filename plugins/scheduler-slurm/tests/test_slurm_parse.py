"""Parsing Slurm's output (offline): squeue and jobcomp lines as the test cluster printed
them, sacct --parsable2 lines in its documented format, states, sizes and TRES texts."""
from typing import Any

import pytest

from tx.specs import AppState
from tx_scheduler_slurm._cluster import ClusterInfo
from tx_scheduler_slurm._parse import (
    Partition, parse_config, parse_gpus, parse_jobcomp, parse_mem_mb, parse_sacct,
    is_tx_job_name, parse_sinfo, parse_squeue, parse_time_min, parse_version, split_job_name,
)
from tx_scheduler_slurm._states import SLURM_STATES, appstate_from_slurm, normalize_state
from tx_scheduler_slurm._status import ran_out_of_memory, replica_root_cause

US = "\x1f"

# squeue --noheader --noconvert --states=all --Format=<squeue_format()> of a 3-component job
SQUEUE = "".join(
    US.join(fields) + US + "\n"
    for fields in [
        ["54", "54", "0", "trainer-0", "RUNNING", "None", "node1", "0", "2", "1024M", "N/A", "N/A", "root",
         "debug", "(null)", "tx-app:x", "54", "N/A", "/tmp/sx"],
        ["55", "54", "1", "trainer-1", "RUNNING", "None", "node2", "0", "2", "1024M", "N/A", "gres:gpu:2", "root",
         "debug", "(null)", "tx-app:x", "54", "N/A", "/tmp/sx"],
        ["56", "54", "2", "reader-0", "PENDING", "Resources", "", "1", "1", "1G", "gres/gpu:a100:4", "N/A", "root",
         "debug", "/w/tx-sbatch.sh", "(null)", "54", "N/A", "/tmp/dir with spaces | and pipes"],
        ["10", "N/A", "N/A", "wrap", "COMPLETED", "None", "node1", "0", "1", "0", "N/A", "N/A", "root", "debug",
         "(null)", "(null)", "10", "N/A", "/tmp"],
        # a job array's task (squeue --array): its own job id 73, named by its array's
        ["73", "N/A", "N/A", "t@r-0", "RUNNING", "None", "node1", "0", "1", "0", "N/A", "N/A", "root", "debug",
         "(null)", "tx-app:t", "70", "3", "/tmp"],
    ]
)

JOBCOMP = """\
JobId=48 UserId=root(0) GroupId=root(0) Name=worker-0 JobState=FAILED Partition=debug TimeLimit=UNLIMITED StartTime=2026-11-22T12:20:59 EndTime=2026-11-22T12:20:59 NodeList=node1 NodeCnt=1 ProcCnt=1 WorkDir=/tmp/a b/job ReservationName= Tres=cpu=1,mem=4G,node=1,billing=1 Account= QOS= WcKey= Cluster=unknown SubmitTime=2026-11-22T12:20:58 EligibleTime=2026-11-22T12:20:58 HetJobId=48 HetJobOffset=0 DerivedExitCode=0:0 ExitCode=3:0 
JobId=49 UserId=root(0) GroupId=root(0) Name=worker-1 JobState=FAILED Partition=debug TimeLimit=UNLIMITED StartTime=2026-11-22T12:20:59 EndTime=2026-11-22T12:20:59 NodeList=node2 NodeCnt=1 ProcCnt=1 WorkDir=/tmp/a b/job ReservationName= Tres=cpu=1,mem=4G,node=1,billing=1 Account= QOS= WcKey= Cluster=unknown SubmitTime=2026-11-22T12:20:58 EligibleTime=2026-11-22T12:20:58 HetJobId=48 HetJobOffset=1 DerivedExitCode=3:0 ExitCode=3:0 
JobId=480 UserId=root(0) GroupId=root(0) Name=other-0 JobState=COMPLETED Partition=debug TimeLimit=UNLIMITED StartTime=2026-11-22T12:20:59 EndTime=2026-11-22T12:20:59 NodeList=node1 NodeCnt=1 ProcCnt=1 WorkDir=/tmp ReservationName= Tres=cpu=1 Account= QOS= WcKey= Cluster=unknown SubmitTime=2026-11-22T12:20:58 EligibleTime=2026-11-22T12:20:58 DerivedExitCode=0:0 ExitCode=0:0 
JobId=48 UserId=root(0) GroupId=root(0) Name=worker-0 JobState=COMPLETED Partition=debug TimeLimit=UNLIMITED StartTime=2026-11-22T12:21:30 EndTime=2026-11-22T12:21:31 NodeList=node3 NodeCnt=1 ProcCnt=1 WorkDir=/tmp/a b/job ReservationName= Tres=cpu=1,mem=4G,node=1,billing=1 Account= QOS= WcKey= Cluster=unknown SubmitTime=2026-11-22T12:20:58 EligibleTime=2026-11-22T12:21:20 HetJobId=48 HetJobOffset=0 DerivedExitCode=0:0 ExitCode=0:0 
"""

# sacct --parsable2 --noheader --allocations --format=JobID,JobName,State,ExitCode,NodeList,ReqCPUS,ReqMem,User,Partition,WorkDir
SACCT = """\
54+0|trainer-0|COMPLETED|0:0|node1|2|1024M|root|debug|/tmp/sx
54+0.batch|batch|COMPLETED|0:0|node1|2||||
54+1|trainer-1|FAILED|3:0|node2|2|1024M|root|debug|/tmp/sx
54+2|reader-0|CANCELLED by 0|0:15|None assigned|1|1G|root|debug|/tmp/a|b
61|solo-0|TIMEOUT|0:0|node4|1|0n|root|debug|/tmp
61_3|arr|COMPLETED|0:0|node4|1|0n|root|debug|/tmp
"""


def test_squeue_records() -> None:
    recs = parse_squeue(SQUEUE)
    assert [(r.job_id, r.app_id, r.offset, r.name) for r in recs] == [
        ("54", "54", 0, "trainer-0"), ("55", "54", 1, "trainer-1"), ("56", "54", 2, "reader-0"),
        ("10", "10", 0, "wrap"), ("70_3", "70_3", 0, "t@r-0"),
    ]
    first, second, third, solo, _task = recs
    assert (first.state, first.nodes, first.restarts, first.cpus_per_task, first.mem_mb, first.gpus) == (
        "RUNNING", "node1", 0, 2, 1024, 0)
    assert second.gpus == 2 and third.gpus == 4 and third.mem_mb == 1024
    assert (third.state, third.reason, third.nodes, third.restarts) == ("PENDING", "Resources", "", 1)
    assert third.work_dir == "/tmp/dir with spaces | and pipes" and third.command == "/w/tx-sbatch.sh"
    assert first.command == "" and first.user == "root" and first.partition == "debug"
    assert solo.mem_mb == -1 and solo.offset == 0


# sacct of one app with its steps (no --allocations), as the accounting test cluster printed
# it for a replica over its memory under task/cgroup: the allocation FAILED, the step OUT_OF_MEMORY
SACCT_OOM = """\
300008+0|trainer-0|FAILED|1:0|node1|1|100M|root|debug|/tmp/j
300008+0.batch|batch|FAILED|1:0|node1|1||||
300008+0.0|bash|CANCELLED by 0|0:9|node1|1||||
300008+1|hog-0|FAILED|1:0|node2|1|100M|root|debug|/tmp/j
300008+1.0|bash|OUT_OF_MEMORY|0:125|node2|1||||
"""


def test_sacct_names_a_component_whose_step_ran_out_of_memory() -> None:
    recs = parse_sacct(SACCT_OOM)
    assert [(r.job_id, r.state) for r in recs] == [("300008+0", "FAILED"), ("300008+1", "OUT_OF_MEMORY")]


@pytest.mark.parametrize("lines, oom", [
    (["srun: error: node2: task 0: Out Of Memory", "[tx] job exited with code 1"], True),
    (["slurmstepd-node1: error: Detected 1 oom-kill event(s) in StepId=5.0. Some of your processes may have "
      "been killed by the cgroup out-of-memory handler."], True),
    (["slurmstepd-node1: error: StepId=1.0 exceeded memory limit (433004544 > 104857600), being killed",
      "srun: error: node1: task 0: Killed"], True),
    (["srun: error: node1: task 0: Exited with exit code 1", "[tx] job exited with code 1"], False),
    (["torch.OutOfMemoryError: CUDA out of memory. Out Of Memory"], False),  # a replica's words
    # an earlier attempt ran out of memory, the last one failed otherwise
    (["srun: error: node2: task 0: Out Of Memory", "[tx] requeueing (retry 1 of 1)",
      "[tx] job 5 attempt 1: rank 0 on node1 (TX_RANK0_HOST=127.0.0.1)", "srun: error: node1: task 0: Exited "
      "with exit code 3"], False),
], ids=["cgroup-srun", "cgroup-slurmstepd", "jobacct-gather", "exit-code", "not-slurm", "earlier-attempt"])
def test_batch_output_says_out_of_memory(tmp_path: Any, lines: Any, oom: bool) -> None:
    (tmp_path / "slurm-5.out").write_text("[tx] job 5 attempt 0: rank 0 on node1 (TX_RANK0_HOST=127.0.0.1)\n"
                                          + "\n".join(lines) + "\n")
    assert ran_out_of_memory(str(tmp_path), "5") is oom
    assert ran_out_of_memory(str(tmp_path), "6") is False  # no output file


def test_squeue_skips_short_and_blank_lines() -> None:
    assert parse_squeue("\n" + US.join(["1", "2"]) + "\n") == []


def test_sacct_records() -> None:
    recs = parse_sacct(SACCT)
    assert [(r.job_id, r.app_id, r.offset, r.name, r.state) for r in recs] == [
        ("54+0", "54", 0, "trainer-0", "COMPLETED"), ("54+1", "54", 1, "trainer-1", "FAILED"),
        ("54+2", "54", 2, "reader-0", "CANCELLED"), ("61", "61", 0, "solo-0", "TIMEOUT"),
        ("61_3", "61_3", 0, "arr", "COMPLETED"),
    ]
    assert recs[1].exit_code == "3:0" and recs[2].exit_code == "0:15"
    assert recs[2].nodes == "" and recs[2].work_dir == "/tmp/a|b" and recs[2].mem_mb == 1024
    assert recs[0].restarts == -1


def test_jobcomp_records_keep_the_last_attempt() -> None:
    recs = parse_jobcomp(JOBCOMP, "48")
    assert [(r.job_id, r.offset, r.name, r.state, r.nodes) for r in recs] == [
        ("48", 0, "worker-0", "COMPLETED", "node3"), ("49", 1, "worker-1", "FAILED", "node2"),
    ]
    assert recs[0].work_dir == "/tmp/a b/job" and recs[1].exit_code == "3:0" and recs[0].user == "root"
    assert [r.job_id for r in parse_jobcomp(JOBCOMP, "480")] == ["480"]
    assert parse_jobcomp(JOBCOMP, "4") == []


def test_sinfo_partitions() -> None:
    text = f"debug*{US}4096{US}3\ndebug*{US}8192+{US}1\ngpu{US}1{US}2\nbroken line\n"
    parts = parse_sinfo(text)
    assert parts == {"debug": Partition("debug", 4096, 4, True, max_mem_mb=8192),
                     "gpu": Partition("gpu", 1, 2, False, max_mem_mb=1)}
    text = f"debug*{US}4096{US}3{US}2{US}1-00:00:00\ndebug*{US}8192{US}1{US}16+{US}1-00:00:00\nlong{US}100{US}1{US}4{US}infinite\n"
    more = parse_sinfo(text)
    assert (more["debug"].cpus, more["debug"].max_time_min, more["long"].max_time_min) == (16, 1440, None)
    assert more["debug"].preempt_mode is None
    modes = parse_sinfo(f"low{US}100{US}1{US}4{US}infinite{US}REQUEUE\nhigh*{US}100{US}1{US}4{US}infinite{US}off\n")
    assert (modes["low"].preempt_mode, modes["high"].preempt_mode) == ("REQUEUE", "OFF")
    info = ClusterInfo(parts, (22, 5))
    assert info.partition(None).name == "debug" and info.partition("nope") is None
    assert info.nomem("gpu") and not info.nomem(None) and not info.nomem("nope")
    assert not info.gpus_per_node() and ClusterInfo(parts, (24, 11)).gpus_per_node()
    assert not ClusterInfo().gpus_per_node() and ClusterInfo().partition(None) is None


@pytest.mark.parametrize("raw, state", [
    ("RUNNING", AppState.RUNNING), ("CANCELLED by 0", AppState.CANCELLED), ("CANCELLED+", AppState.CANCELLED),
    (" completed ", AppState.SUCCEEDED), ("REQUEUED", AppState.PENDING), ("COMPLETING", AppState.RUNNING),
    ("OUT_OF_MEMORY", AppState.FAILED), ("NODE_FAIL", AppState.FAILED), ("TIMEOUT", AppState.FAILED),
    ("SOMETHING_NEW", AppState.UNKNOWN), ("", AppState.UNKNOWN), ("+", AppState.UNKNOWN),
])
def test_states(raw: str, state: AppState) -> None:
    assert appstate_from_slurm(raw) == state


def test_every_mapped_state_is_an_appstate() -> None:
    assert all(isinstance(v, AppState) and normalize_state(k) == k for k, v in SLURM_STATES.items())


def test_small_parsers() -> None:
    assert [parse_mem_mb(t) for t in ("1024M", "1G", "4096", "2Gn", "500Mc", "2048K", "0", "N/A", "x")] == [
        1024, 1024, 4096, 2048, 500, 2, -1, -1, -1]
    assert [parse_gpus(t) for t in ("gres/gpu:2", "gres:gpu:a100:4", "gpu:1", "gres/gpu", "cpu=1,gres/gpu=3",
                                    "N/A", "", "gres/mygpux:2")] == [2, 4, 1, 1, 3, 0, 0, 0]
    assert parse_version("slurm-wlm 22.05.8") == (22, 5) and parse_version("slurm 24.11.0 rev1") == (24, 11)
    assert parse_version("nothing") is None
    assert parse_config("JobCompType             = jobcomp/filetxt\nJobCompLoc = /a b\nnot a line") == {
        "JobCompType": "jobcomp/filetxt", "JobCompLoc": "/a b"}
    assert split_job_name("trainer-12") == ("trainer", 12) and split_job_name("my-role-0") == ("my-role", 0)
    assert split_job_name("wrap") == ("wrap", None) and split_job_name("-3") == ("-3", None)


def test_time_in_minutes() -> None:
    assert [parse_time_min(t) for t in ("90", "1:30", "1:00:01", "2-3", "2-03:04", "1-0:0:30", "UNLIMITED", "x")] == [
        90, 2, 61, 2 * 1440 + 180, 2 * 1440 + 184, 1441, None, None]


def test_job_names_of_tx_and_others() -> None:
    assert split_job_name("my.app@trainer-3") == ("trainer", 3) and is_tx_job_name("a@b-0")
    assert not is_tx_job_name("trainer-3") and not is_tx_job_name("wrap") and not is_tx_job_name("a@b")


def test_telling_line_of_a_stderr_tail() -> None:
    from tx_scheduler_slurm._status import telling_line

    torchrun = "[0]:Traceback (most recent call last):\n[0]:ModuleNotFoundError: No module named 'x'\n" \
               "  raise ChildFailedError(\n=====\n  error_file: <N/A>\n=====\n"
    assert telling_line(torchrun) == "[0]:ModuleNotFoundError: No module named 'x'"
    assert telling_line("bad input file\n===\n") == "bad input file" and telling_line("") == ""


def _rec(state: str, offset: int = 0, **kw: Any) -> Any:
    from tx_scheduler_slurm._parse import JobRecord

    return JobRecord(job_id=str(6 + offset), app_id="6", offset=offset, name=f"a@w-{offset}", state=state, **kw)


def test_pending_reasons_are_explained() -> None:
    from tx_scheduler_slurm._status import explain_reason, state_msg

    assert explain_reason("Priority") == "Priority: jobs of higher priority wait before it in its partition"
    assert explain_reason("ReqNodeNotAvail, UnavailableNodes:node3") == (
        "ReqNodeNotAvail: a node it needs is down, drained or reserved (unavailable: node3)")
    assert explain_reason("QOSMaxGRESPerUser") == (
        "QOSMaxGRESPerUser: a limit of its QOS holds it (max GRESPerUser); it starts when its own or others' jobs end")
    assert explain_reason("AssocGrpCpuLimit").startswith("AssocGrpCpuLimit: a limit of its account (association)")
    assert explain_reason("SomethingNew") == "SomethingNew"
    assert state_msg(_rec("PENDING", reason="BeginTime", restarts=2), []) == (
        "PENDING: BeginTime: its start time has not come (a requeued job waits a while before it may start "
        "again) (requeued 2 time(s))")
    running = [_rec("RUNNING", nodes="node1"), _rec("RUNNING", 1, nodes="node2")]
    assert state_msg(running[0], running) == "RUNNING on node1,node2"


@pytest.mark.parametrize("state, expected", [
    ("NODE_FAIL", "NODE_FAIL: the job lost a node that failed under it (nodes node1,node2)"),
    ("OUT_OF_MEMORY", "OUT_OF_MEMORY: the job was killed: a replica used more memory than it asked for "
                      "(resource memMB) (nodes node1,node2)"),
    ("PREEMPTED", "PREEMPTED: the job was preempted by a job of higher priority (nodes node1,node2)"),
])
def test_why_failed_names_slurms_state(state: str, expected: str) -> None:
    from tx_scheduler_slurm._status import why_failed

    recs = [_rec(state, nodes="node1"), _rec(state, 1, nodes="node2")]
    assert why_failed(AppState.FAILED, recs[0], recs, "", "") == expected


def test_why_failed_from_slurms_exit_code_without_replica_records() -> None:
    from tx_scheduler_slurm._status import why_failed

    recs = [_rec("FAILED", exit_code="0:0"), _rec("FAILED", 1, exit_code="0:9")]
    assert why_failed(AppState.FAILED, recs[0], recs, "", "") == "het component 1 (a@w-1): killed by SIGKILL"
    recs = [_rec("FAILED", exit_code="2:0")]
    assert why_failed(AppState.FAILED, recs[0], recs, "", "") == "het component 0 (a@w-0): exit code 2"
    assert why_failed(AppState.SUCCEEDED, recs[0], recs, "", "") == "<NONE>"


def test_describe_names_the_component_that_ran_out_of_memory(tmp_path: Any) -> None:
    """sacct's records of a job whose second component's step ran out of memory: the app
    FAILED, its msg and structured error say OUT_OF_MEMORY (no replica files here)."""
    from tx_scheduler_slurm._status import build_describe

    desc = build_describe("300008", parse_sacct(SACCT_OOM.replace("/tmp/j", str(tmp_path))), "sacct")
    assert desc.state == AppState.FAILED
    assert desc.msg == ("OUT_OF_MEMORY: was killed: a replica used more memory than it asked for (resource memMB) "
                        "(nodes node1,node2)")
    assert desc.structured_error_msg.startswith("OUT_OF_MEMORY: the job was killed"), desc.structured_error_msg


def test_replica_state_waits_for_the_app_before_calling_a_killed_replica_failed() -> None:
    """scancel kills replicas before Slurm reports the job CANCELLED: a replica killed by a
    signal keeps its component's state until the app ends, so it never goes FAILED ->
    CANCELLED; an ordinary non-zero status is FAILED at once; a replica with no status yet
    in a cancelled or failed app is the app's."""
    from tx_scheduler_slurm._status import replica_state

    running, cancelled, failed = AppState.RUNNING, AppState.CANCELLED, AppState.FAILED
    assert replica_state(running, running, 143) == running
    assert replica_state(running, running, -9) == running
    assert replica_state(cancelled, cancelled, 143) == cancelled
    assert replica_state(failed, failed, 137) == failed
    assert replica_state(running, running, 3) == failed
    assert replica_state(running, running, 0) == AppState.SUCCEEDED
    assert replica_state(running, AppState.PENDING, None) == AppState.PENDING
    # a cancelled het job whose leader ended while another component is still COMPLETING
    # (test_cancel saw a RUNNING replica in a CANCELLED app, at load 4-9)
    assert replica_state(cancelled, running, None) == cancelled
    assert replica_state(failed, running, None) == failed
    assert replica_state(AppState.SUCCEEDED, running, None) == running


def test_array_task_ids_in_squeues_spec() -> None:
    from tx_scheduler_slurm._parse import in_array_tasks

    assert in_array_tasks(3, "2-9%2") and not in_array_tasks(1, "2-9%2")
    assert in_array_tasks(6, "1,3,5-7") and not in_array_tasks(4, "1,3,5-7")
    assert in_array_tasks(4, "0-10:2") and not in_array_tasks(5, "0-10:2")
    assert in_array_tasks(7, "")  # the whole array (cancelled before any task started)


def test_root_cause_leaves_out_slurms_own_lines(tmp_path: Any) -> None:
    """slurmstepd writes ``*** STEP ... CANCELLED ***`` into a task's stderr when srun ends
    the step, possibly after the failed program's traceback (seen on the test cluster): the
    exception's message stays the program's own, and a status over 128 is a signal."""
    err = tmp_path / "slurm-5-worker-0.err"
    err.write_bytes(b'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
                    b"ValueError: bad shard 7\n"
                    b"slurmstepd-node2: error: *** STEP 5+1.0 ON node2 CANCELLED AT 2026-11-25T16:21:48 ***\n")
    cause = replica_root_cause("worker", 0, str(err), 1)
    assert cause is not None and cause.text == "worker/0: ValueError: bad shard 7 at <string>:1 (exit code 1)"
    err.write_bytes(b"about to crash\n")
    assert replica_root_cause("worker", 0, str(err), 139) is None  # no exception: the old message says more
    assert replica_root_cause("worker", 0, str(tmp_path / "missing.err"), 1) is None
