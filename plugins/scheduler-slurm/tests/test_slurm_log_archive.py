"""The log archive on the private cluster: while the Runner waits on a job it copies each
replica's output file; after ``scancel`` and the job's files deleted, ``tx log`` prints
every byte from the archive, and `tx status` still names why a failed job failed
(docs/recovery.md)."""
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, List

import pytest

from tx.runner import get_runner
from tx.specs import AppDef, AppState, Resource, Role

pytestmark = pytest.mark.slurm

SCRIPT = (r'for i in 1 2 3 4 5; do printf "r%s \377 line %s\n" "$TX_REPLICA_ID" "$i"; sleep 0.3; done; '
          r'printf "tail, no newline"; exec sleep 600')


def expected(k: int) -> bytes:
    return b"".join(b"r%d \xff line %d\n" % (k, i) for i in range(1, 6)) + b"tail, no newline"


def test_logs_outlive_the_jobs_files(slurm_nodes: List[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / ".txconfig"
    conf.write_text(f"[tx:logs]\narchive = {tmp_path / 'archive'}\ninterval = 0.3\n")
    monkeypatch.setenv("TXCONFIG", str(conf))
    job_dir = tmp_path / "job"
    role = Role("talker", image="", entrypoint="bash", args=["-c", SCRIPT], num_replicas=2,
                resource=Resource(cpu=1, gpu=0, memMB=64))
    with get_runner() as runner:
        handle = runner.run(AppDef("archived", roles=[role]), "slurm", cfg={"job_dir": str(job_dir)})
        archive = runner.log_archive
        waited: List[Any] = []
        waiter = threading.Thread(target=lambda: waited.append(runner.wait(handle, wait_interval=0.5, timeout=300)))
        waiter.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and any(archive.size(handle, "talker", k) < len(expected(k)) for k in (0, 1)):
            time.sleep(0.2)
        for k in (0, 1):  # copied while the job runs, in several parts
            assert b"".join(archive.read_blocks(handle, "talker", k)) == expected(k)
        assert len(list(archive.read_blocks(handle, "talker", 0))) > 1
        runner.cancel(handle)
        waiter.join(timeout=120)
        assert waited and waited[0].state == AppState.CANCELLED, waited
        assert archive.is_complete(handle)
    app_id = handle.rsplit("/", 1)[1]
    files = sorted(job_dir.glob(f"slurm-{app_id}-*"))
    assert files
    for f in files:
        f.unlink()
    p = subprocess.run([str(Path(sys.executable).parent / "tx"), "log", handle], env=dict(os.environ),
                       cwd=tmp_path, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    for k in (0, 1):  # replicas' lines may interleave (whole lines): compare each replica's
        prefix = b"talker/%d " % k
        got = b"".join(line[len(prefix):] for line in p.stdout.splitlines(keepends=True) if line.startswith(prefix))
        assert got == expected(k) + b"\n", p.stdout  # the relay ends the last line
    assert b"reading the log from tx's log archive" in p.stderr and b"does not exist" in p.stderr, p.stderr


FAIL_PY = 'import sys\n\n\ndef main():\n    raise ValueError("bad learning rate")\n\n\nmain()\n'
WHY = "fail/0: ValueError: bad learning rate at fail.py:5 (exit code 1)"


def test_why_it_failed_outlives_the_jobs_files(slurm_nodes: List[str], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Why the job failed is recorded with the archive when tx sees it end: once its output
    files are deleted, ``tx status`` (Slurm still knows the job) names the exception and
    file:line, not the exit status (issue 41, seam 9)."""
    conf = tmp_path / ".txconfig"
    conf.write_text(f"[tx:logs]\narchive = {tmp_path / 'archive'}\n")
    monkeypatch.setenv("TXCONFIG", str(conf))
    (tmp_path / "fail.py").write_text(FAIL_PY)
    job_dir = tmp_path / "job"
    role = Role("fail", image="", entrypoint=sys.executable, args=[str(tmp_path / "fail.py")],
                resource=Resource(cpu=1, gpu=0, memMB=64))
    with get_runner() as runner:
        handle = runner.run(AppDef("why", roles=[role]), "slurm", cfg={"job_dir": str(job_dir)})
        st = runner.wait(handle, wait_interval=0.5, timeout=300)
        assert st is not None and st.state == AppState.FAILED and st.structured_error_msg == WHY, st
        assert runner.log_archive.is_complete(handle)  # the wait's last copy, made before it returned
    app_id = handle.rsplit("/", 1)[1]
    files = sorted(job_dir.glob(f"slurm-{app_id}-*"))
    assert files
    for f in files:
        f.unlink()
    tx = str(Path(sys.executable).parent / "tx")
    p = subprocess.run([tx, "status", "--json", handle], env=dict(os.environ), cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    js = json.loads(p.stdout)
    assert js["state"] == "FAILED" and js["structured_error_msg"] == WHY, js
    assert (js["root_cause"]["exception_type"], js["root_cause"]["line"]) == ("ValueError", 5), js
    text = subprocess.run([tx, "status", handle], env=dict(os.environ), cwd=tmp_path, capture_output=True, text=True,
                          timeout=120).stdout
    assert f"  Structured Error Msg: {WHY}\n" in text, text
