"""Directories tx writes are created with their parents, as TorchX users expect from
``log_dir`` (see test_torchx_command.py for local): Slurm's ``job_dir`` ``a/b/c`` under a
directory that has none of them, through ``tx run`` and ``torchx run`` on the session's
private Slurm cluster; a dryrun creates nothing."""
from pathlib import Path
from typing import Any, List

import pytest

pytestmark = pytest.mark.slurm


def test_slurm_job_dir_is_created_with_parents(slurm_nodes: List[str], cli: Any, tmp_path: Path) -> None:
    job_dir = tmp_path / "runs" / "2026" / "job"
    dry = cli("run", "--dryrun", "-s", "slurm", "-cfg", f"job_dir={job_dir}", "utils.echo", "--msg", "hi")
    assert dry.returncode == 0, dry.stderr
    assert not (tmp_path / "runs").exists()  # a dryrun makes nothing
    p = cli("run", "--wait", "-s", "slurm", "-cfg", f"job_dir={job_dir}", "utils.echo", "--msg", "hello nested")
    assert p.returncode == 0, p.stderr
    app_id = p.stdout.split()[0].rsplit("/", 1)[1]
    outs = list(job_dir.glob(f"slurm-{app_id}*.out"))
    assert outs and "hello nested" in "".join(o.read_text() for o in outs), sorted(job_dir.iterdir())
