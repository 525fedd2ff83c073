"""The log archive on the private cluster: while the Runner waits on a job it copies each
replica's output file; after ``scancel`` and the job's files deleted, ``tx log`` prints
every byte from the archive (docs/recovery.md)."""
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
