"""tx.schedulers.why: one line naming why a torchrun replica failed. The slow tests run real
torchrun (2 gloo CPU workers, rank 1 fails) in the ways schedulers meet it; the fast ones
feed the helper the shapes of output those runs print (prefixes, report, error file)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, Optional

import pytest

from tx.testing.backends import require_module

from tx.schedulers.why import names_cause, parse_error_file, parse_failures, parse_report, root_cause, why_failed
from tx.specs import RootCause

BIN = Path(sys.executable).parent

# -- the shapes torchrun prints (taken from real torchrun 2.13 runs, shortened) -----------------

HEAD = """\
E1125 12:34:08.333000 1924 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 1
Traceback (most recent call last):
  File "/venv/bin/torchrun", line 6, in <module>
    sys.exit(main())
  File "/venv/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 383, in launch_agent
    raise ChildFailedError(
"""
REPORT = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
{other}------------------------------------------------------------
Root Cause (first observed failure):
[0]:
{root}============================================================
"""
BLOCK = """\
  time      : 2026-11-25_12:34:08
  host      : localhost
  rank      : {rank} (local_rank: {local})
  exitcode  : {code} (pid: {pid}){sig}
  error_file: {file}
  traceback : {tb}
"""
NO_TB = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
SIGTERMED = {"rank": 0, "local": 0, "code": -15, "sig": "SIGTERM", "tb": "Signal 15 (SIGTERM) received by PID 1997"}


def block(rank: int, local: int, code: int, sig: str = "", file: str = "<N/A>", tb: str = NO_TB,
          pid: int = 1998) -> str:
    """One worker's block of torchrun's ChildFailedError report."""
    return BLOCK.format(rank=rank, local=local, code=code, pid=pid, sig=f"  ({sig})" if sig else "", file=file, tb=tb)


def torchrun_report(root: Dict[str, Any], other: Dict[str, Any], head: bool = True) -> str:
    """The report torchrun prints (its own traceback first where ``head``): the root cause's
    block and one other failure's (each :func:`block`'s arguments)."""
    return (HEAD if head else "") + REPORT.format(root=block(**root), other=block(**other))


def report(rank: int = 1, local: int = 1, code: int = 1, sig: str = "", tb: str = NO_TB) -> str:
    return torchrun_report({"rank": rank, "local": local, "code": code, "sig": sig, "tb": tb}, SIGTERMED)


def rank_tb(rank: int, exc: str, line: int = 41, prefix: str = "") -> str:
    body = textwrap.dedent(f"""\
        Traceback (most recent call last):
          File "/work/train.py", line 90, in <module>
            main()
          File "/work/train.py", line {line}, in main
            step(model)
        """) + exc
    return "".join(f"{prefix}[rank{rank}]: {ln}\n" for ln in body.splitlines())


RANK0_TB = rank_tb(0, "RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:55502.", line=14)


def test_the_failing_rank_is_the_one_the_report_names_not_the_last_traceback():
    # rank 0's traceback (a consequence) comes after rank 1's (the cause)
    log = rank_tb(1, "RuntimeError: CUDA out of memory (simulated)") + RANK0_TB + report()
    cause = root_cause("train", 0, log, exit_code=1)
    assert cause.text == "train/0 rank 1: RuntimeError: CUDA out of memory (simulated) at train.py:41 (exit code 1)"
    assert (cause.rank, cause.local_rank, cause.exception_type, cause.file, cause.line, cause.source) == (
        1, 1, "RuntimeError", "/work/train.py", 41, "traceback")
    assert names_cause(cause)


def test_interleaved_lines_of_two_ranks_are_told_apart_by_their_prefixes():
    a = rank_tb(1, "ValueError: bad batch", prefix="[1]:").splitlines(keepends=True)
    b = RANK0_TB.replace("[rank0]", "[0]:[rank0]").splitlines(keepends=True)
    mixed = "".join(x for pair in zip(a, b) for x in pair)
    cause = root_cause("train", 0, mixed + report(), exit_code=1)
    assert cause.text == "train/0 rank 1: ValueError: bad batch at train.py:41 (exit code 1)"


def test_without_a_report_the_first_rank_that_printed_a_traceback():
    log = rank_tb(1, "KeyError: 'lr'") + RANK0_TB  # the report was cut off, or torchrun was killed
    assert why_failed("train", 0, log, exit_code=1) == "train/0 rank 1: KeyError: 'lr' at train.py:41 (exit code 1)"


def test_chained_exceptions_give_the_last_one():
    body = textwrap.dedent("""\
        Traceback (most recent call last):
          File "/work/train.py", line 10, in load
            open(path)
        FileNotFoundError: [Errno 2] No such file or directory: 'ckpt.pt'

        During handling of the above exception, another exception occurred:

        Traceback (most recent call last):
          File "/work/train.py", line 12, in load
            raise RuntimeError("no checkpoint to resume from")
        RuntimeError: no checkpoint to resume from
        """)
    log = "".join(f"[rank1]: {ln}\n" if ln else "\n" for ln in body.splitlines()) + report()
    cause = root_cause("train", 0, log, exit_code=1)
    assert cause.text == "train/0 rank 1: RuntimeError: no checkpoint to resume from at train.py:12 (exit code 1)"


def test_a_message_over_several_lines_is_one_line_out():
    exc = "RuntimeError: Error(s) in loading state_dict for Net:\n\tMissing key(s) in state_dict: \"fc.weight\"."
    cause = root_cause("train", 0, rank_tb(1, exc) + report(), exit_code=1)
    assert cause.message == "Error(s) in loading state_dict for Net:\n\tMissing key(s) in state_dict: \"fc.weight\"."
    assert cause.text == ('train/0 rank 1: RuntimeError: Error(s) in loading state_dict for Net: Missing key(s) in '
                          'state_dict: "fc.weight". at train.py:41 (exit code 1)')
    long = root_cause("train", 0, rank_tb(1, "ValueError: " + "x" * 1000) + report(), exit_code=1).text
    assert "\n" not in long and len(long) < 250 and "x..." in long


def test_bytes_that_are_not_utf8_are_replaced():
    log = rank_tb(1, "UnicodeDecodeError: bad \udcff byte").encode("utf-8", "surrogateescape") + b"\xff\xfe\n"
    cause = root_cause("train", 0, log + report().encode(), exit_code=1)
    assert cause.exception_type == "UnicodeDecodeError" and cause.message == "bad \ufffd byte"


def test_no_traceback_names_the_signal():
    cause = root_cause("train", 0, RANK0_TB + report(code=-9, sig="SIGKILL",
                                                     tb="Signal 9 (SIGKILL) received by PID 1998"), exit_code=1)
    assert cause.text == "train/0 rank 1: killed by signal SIGKILL"
    assert (cause.exit_code, cause.signal) == (-9, "SIGKILL")
    assert names_cause(cause)  # the report named the rank


def test_no_traceback_no_report_falls_back_to_the_last_line_and_exit_status():
    log = b"loading data\nerror: disk quota exceeded\n\n"
    cause = root_cause("sh", 2, log, exit_code=3)
    assert cause.text == "sh/2: error: disk quota exceeded (exit code 3)"
    assert not names_cause(cause)
    assert why_failed("sh", 0, "", exit_code=-11) == "sh/0: killed by signal SIGSEGV"
    assert why_failed("sh", 0, None) == "sh/0: failed"
    # torchrun --redirects without --tee: only the report reaches the replica's output
    assert why_failed("train", 0, report(), exit_code=1) == "train/0 rank 1: exited with code 1"


def test_a_plain_python_traceback_without_prefixes():
    log = "starting\n" + "".join(ln.split(": ", 1)[1] + "\n" for ln in rank_tb(0, "ZeroDivisionError: division by zero")
                                 .splitlines())
    assert why_failed("python", 0, log, exit_code=1) == (
        "python/0: ZeroDivisionError: division by zero at train.py:41 (exit code 1)")


def test_the_innermost_frame_outside_installed_packages_is_where():
    body = textwrap.dedent("""\
        [rank1]: Traceback (most recent call last):
        [rank1]:   File "/work/train.py", line 41, in main
        [rank1]:     loss = model(x)
        [rank1]:   File "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1751, in _call_impl
        [rank1]:     return forward_call(*args, **kwargs)
        [rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.
        """)
    cause = root_cause("train", 0, body + report(), exit_code=1)
    assert cause.text == ("train/0 rank 1: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
                          "at train.py:41 (exit code 1)")


ERROR_FILE = {"message": {
    "message": "RuntimeError: CUDA out of memory (simulated)",
    "extraInfo": {"py_callstack": 'Traceback (most recent call last):\n  File "/work/train.py", line 41, in main\n'
                                  '    raise RuntimeError("CUDA out of memory (simulated)")\n'
                                  "RuntimeError: CUDA out of memory (simulated)\n", "timestamp": "1795610062"},
    "errorCode": 1}}


def test_the_error_file_wins_and_the_report_gives_the_rank():
    cause = root_cause("train", 0, RANK0_TB + report(), json.dumps(ERROR_FILE).encode(), exit_code=1)
    assert cause.text == "train/0 rank 1: RuntimeError: CUDA out of memory (simulated) at train.py:41 (exit code 1)"
    assert cause.source == "error_file"
    alone = root_cause("train", 0, None, json.dumps(ERROR_FILE))
    assert alone.text == "train/0: RuntimeError: CUDA out of memory (simulated) at train.py:41 (exit code 1)"


# torchrun names as root cause the worker it observed first: of two ranks that end together,
# the one that only lost its peer (as c31 of 7d3ac94 printed it, shortened)
def race(code1: int, file1: str, tb1: str, file0: str, tb0: str) -> str:
    return torchrun_report({"rank": 0, "local": 0, "code": 1, "file": file0, "tb": tb0},
                           {"rank": 1, "local": 1, "code": code1, "file": file1, "tb": tb1}, head=False)


RANK0_LOST = {"message": {
    "message": "RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:19367.",
    "extraInfo": {"py_callstack": 'Traceback (most recent call last):\n  File "/work/train.py", line 14, in main\n'
                                  "    dist.barrier()\nRuntimeError: [pair.cc:553] Connection closed by peer "
                                  "[127.0.0.1]:19367.\n", "timestamp": "1795610061"},
    "errorCode": 1}}


def test_a_rank_that_only_lost_its_peer_is_not_the_cause_where_the_report_names_it():
    log = rank_tb(1, "RuntimeError: CUDA out of memory (simulated)") + RANK0_TB + race(
        code1=7, file1="<N/A>", tb1=NO_TB, file0="<N/A>", tb0=NO_TB)
    cause = root_cause("train", 0, log, exit_code=1)
    # rank 1's exception, and its own exit code from the report's other failures
    assert cause.text == "train/0 rank 1: RuntimeError: CUDA out of memory (simulated) at train.py:41 (exit code 7)"
    assert (cause.rank, cause.local_rank, cause.source) == (1, 1, "traceback")


def test_a_lost_peers_error_file_gives_way_to_the_other_failures_recorded_traceback():
    # @record and --log-dir: torchrun copied rank 0's file; the report holds rank 1's callstack
    stack = ERROR_FILE["message"]["extraInfo"]["py_callstack"].replace("\n", "\n  ")
    log = race(code1=1, file1="/logs/1/error.json", tb1=stack, file0="/logs/0/error.json",
                      tb0=RANK0_LOST["message"]["extraInfo"]["py_callstack"].replace("\n", "\n  "))
    cause = root_cause("train", 0, log, json.dumps(RANK0_LOST), exit_code=1)
    assert cause.text == "train/0 rank 1: RuntimeError: CUDA out of memory (simulated) at train.py:41 (exit code 1)"
    assert cause.source == "report"
    # without the report: only the lost peer is known, and it is said as it is
    assert "Connection closed by peer" in root_cause("train", 0, None, json.dumps(RANK0_LOST), exit_code=1).text


def test_without_a_report_a_lost_peers_traceback_printed_first_gives_way():
    cause = root_cause("train", 0, RANK0_TB + rank_tb(1, "ValueError: bad batch", line=77), exit_code=1)
    assert cause.text == "train/0 rank 1: ValueError: bad batch at train.py:77 (exit code 1)"
    # every rank lost a peer: the first is said, not nothing
    both = root_cause("train", 0, RANK0_TB + rank_tb(1, "RuntimeError: [pair.cc:553] Connection closed by peer"), exit_code=1)
    assert both.rank == 0 and "Connection closed by peer" in both.text


@pytest.mark.parametrize("data,want", [
    ("", (None, None)),
    ("not json\nsecond", ("", "not json", None)),
    ('{"message": "ValueError: new format"}', ("ValueError", "new format", None)),
    ('{"message": {"message": "OSError: x", "errorCode": -9}}', ("OSError", "x", -9)),
    ("[1, 2]", ("", "[1, 2]", None)),
])
def test_error_files_of_every_shape(data, want):
    err, code = parse_error_file(data)
    got = (None, code) if err is None else (err.exception_type, err.message, code)
    assert got == want


def test_the_report_behind_a_label_a_backend_adds():
    labelled = "".join(f"0: {ln}\n" for ln in report(rank=3, local=1, code=-6, sig="SIGABRT").splitlines())
    rep = parse_report(labelled.splitlines())
    assert rep is not None and (rep.rank, rep.local_rank, rep.exit_code, rep.signal) == (3, 1, -6, "SIGABRT")
    assert parse_report(["nothing here"]) is None
    # the other failures, behind the same label
    others = parse_failures(labelled.splitlines())[1:]
    assert [(r.rank, r.local_rank, r.exit_code, r.signal) for r in others] == [(0, 0, -15, "SIGTERM")]
    assert others[0].traceback == ["Signal 15 (SIGTERM) received by PID 1997"]
    assert parse_failures(["nothing here"]) == []


def test_root_cause_json_has_the_fields_and_the_line():
    cause = RootCause("train", 0, rank=1, exception_type="ValueError", message="m", file="/a/t.py", line=3,
                      exit_code=1)
    js = cause.to_json()
    assert js["rank"] == 1 and js["file"] == "/a/t.py" and js["text"] == "train/0 rank 1: ValueError: m at t.py:3 (exit code 1)"


# -- real torchrun ------------------------------------------------------------------------------

SCRIPT = '''\
import os, signal, sys
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


def load():
    try:
        open("/nonexistent/ckpt.pt")
    except OSError:
        raise RuntimeError("no checkpoint\\nto resume from")


def main():
    if os.environ.get("EARLY") and os.environ["RANK"] == "1":
        raise ValueError("bad config before init")
    dist.init_process_group("gloo")
    print(f"rank {dist.get_rank()} up", flush=True)
    if dist.get_rank() == 1:
        if os.environ.get("KILL"):
            os.kill(os.getpid(), signal.SIGKILL)
        if os.environ.get("CHAINED"):
            load()
        if os.environ.get("PEER_FIRST"):  # after its traceback: close the group, live until stopped
            import atexit, time
            atexit.register(lambda: (dist.destroy_process_group(), time.sleep(120)))
        raise RuntimeError("CUDA out of memory (simulated)")
    dist.barrier()


if os.environ.get("RECORD"):
    main = record(main)
if __name__ == "__main__":
    main()
'''

#: the line of SCRIPT where rank 1 raises
RAISE_LINE = SCRIPT.splitlines().index('        raise RuntimeError("CUDA out of memory (simulated)")') + 1
EARLY_LINE = SCRIPT.splitlines().index('        raise ValueError("bad config before init")') + 1
LOAD_LINE = SCRIPT.splitlines().index('        raise RuntimeError("no checkpoint\\nto resume from")') + 1


def _torchrun(tmp_path: Path, env: Dict[str, str], *args: str) -> subprocess.CompletedProcess:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    full = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC", "PET_"))}
    full.update(env, OMP_NUM_THREADS="1")
    return subprocess.run(
        [str(BIN / "torchrun"), "--nproc-per-node", "2", "--standalone", *args, str(script)],
        cwd=tmp_path, env=full, capture_output=True, timeout=180,
    )


def _error_file(tmp_path: Path) -> Optional[bytes]:
    path = tmp_path / "error.json"
    return path.read_bytes() if path.exists() else None


torchrun_cases = pytest.mark.parametrize("env,args,want", [
    # no @record: no error file; the rank's traceback through torch's [rank1]: prefix
    ({}, (), f"train/0 rank 1: RuntimeError: CUDA out of memory (simulated) at train.py:{RAISE_LINE} (exit code 1)"),
    # @record: the error file torchrun copied to its TORCHELASTIC_ERROR_FILE, per-rank logs in --log-dir
    ({"RECORD": "1"}, ("--log-dir", "logs"),
     f"train/0 rank 1: RuntimeError: CUDA out of memory (simulated) at train.py:{RAISE_LINE} (exit code 1)"),
    # what tx's dist.ddp passes: --tee 3 and an empty --role, so lines read [1]:[rank1]:
    ({"CHAINED": "1"}, ("--tee", "3", "--role", ""),
     f"train/0 rank 1: RuntimeError: no checkpoint to resume from at train.py:{LOAD_LINE} (exit code 1)"),
    ({"KILL": "1"}, ("--tee", "3"), "train/0 rank 1: killed by signal SIGKILL"),
    # rank 0 fails first (its peer gone) and the report names it; rank 1, stopped by torchrun, raised
    ({"PEER_FIRST": "1"}, (), f"train/0 rank 1: RuntimeError: CUDA out of memory (simulated) at train.py:{RAISE_LINE} "
                              "(signal SIGTERM)"),
    # before init_process_group: no prefix, the last traceback that is not torchrun's own
    ({"EARLY": "1"}, (), f"train/0 rank 1: ValueError: bad config before init at train.py:{EARLY_LINE} (exit code 1)"),
], ids=["plain", "record-log-dir", "tee-chained", "sigkill", "peer-first", "before-init"])


@pytest.mark.slow
@torchrun_cases
def test_real_torchrun_rank_1_fails(tmp_path, env, args, want):
    require_module("torch", "the case runs real torchrun: pip install torch==2.13.0")
    p = _torchrun(tmp_path, {**env, "TORCHELASTIC_ERROR_FILE": str(tmp_path / "error.json")}, *args)
    assert p.returncode == 1, p.stderr[-3000:]
    cause = root_cause("train", 0, p.stderr, _error_file(tmp_path), exit_code=p.returncode)
    assert cause.text == want, p.stderr.decode(errors="replace")[-4000:]
    if env.get("RECORD"):
        # the error file torchrun copied; where that was rank 0's lost peer (the two ranks end in
        # the same second, a race), the report's traceback of rank 1 from its own file
        assert cause.source in ("error_file", "report")
        # the log alone (a scheduler that cannot read the file) gives the same line
        assert root_cause("train", 0, p.stderr, exit_code=1).text == want


def test_a_logged_traceback_the_program_went_on_after_is_not_the_cause():
    logged = "".join(ln.split(": ", 1)[1] + "\n" for ln in rank_tb(0, "TimeoutError: retrying").splitlines())
    # it exited 2: not what an uncaught exception makes Python do
    cause = root_cause("sh", 0, logged + "retry 2 failed too\nerror: giving up\n", exit_code=2)
    assert cause.text == "sh/0: error: giving up (exit code 2)" and not names_cause(cause)
    # it went on after the traceback (a log line, a blank line, more output)
    cause = root_cause("sh", 0, logged + "\nall retries failed\n", exit_code=1)
    assert cause.text == "sh/0: all retries failed (exit code 1)" and not names_cause(cause)
