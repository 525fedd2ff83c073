"""The directory workspace: copy the workspace into a new job directory that the role's
replicas then run from (Slurm's ``job_dir``, TorchX's ``DirWorkspaceMixin``)."""
from __future__ import annotations

import os
import shutil

from tx.workspace.api import IGNORE_FILE, walk_workspace


def copy_workspace(workspace: str, job_dir: str, ignore_name: str = IGNORE_FILE) -> int:
    """Copy the files of ``workspace`` (minus those its ignore file excludes) into
    ``job_dir``, which must not exist yet; file modes are kept. Returns the file count.

    Raises:
        FileExistsError: ``job_dir`` exists (a job directory is never reused).
        NotADirectoryError: ``workspace`` is not a directory.
    """
    if os.path.exists(job_dir):
        raise FileExistsError(f"job_dir {job_dir!r} already exists; give a new directory")
    files = list(walk_workspace(workspace, ignore_name))
    os.makedirs(job_dir)
    try:
        for rel in files:
            dst = os.path.join(job_dir, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(os.path.join(workspace, rel), dst)
    except BaseException:
        shutil.rmtree(job_dir, ignore_errors=True)  # leave nothing half-made
        raise
    return len(files)


class DirWorkspace:
    """Workspace kind ``dir``: ``build(workspace, job_dir)`` copies and returns ``job_dir``."""

    def build(self, workspace: str, job_dir: str) -> str:
        copy_workspace(workspace, job_dir)
        return job_dir
