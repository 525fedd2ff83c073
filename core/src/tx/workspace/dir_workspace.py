"""The directory workspace: copy the workspace into a new job directory that the role's
replicas then run from (Slurm's ``job_dir``, TorchX's ``DirWorkspaceMixin``)."""
from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, Mapping

import attrs

from tx.specs.runopts import runopts
from tx.workspace.api import IGNORE_FILE, Workspace, WorkspaceError, walk_workspace

if TYPE_CHECKING:
    from tx.specs.api import Role
    from tx.specs.runopts import CfgVal, runopts

__all__ = ["copy_workspace", "DirWorkspace"]


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


class DirWorkspace(Workspace):
    """Workspace kind ``dir``: with run option ``job_dir`` set, copy the workspace into it
    (it must not exist) and make it the role's image (the directory replicas run in);
    without ``job_dir`` the role is returned unchanged and runs where the scheduler runs
    it (TorchX's ``DirWorkspaceMixin``)."""

    kind = "dir"

    def run_opts(self) -> "runopts":

        opts = runopts()
        opts.add(
            "job_dir", type_=str, default=None,
            help="directory to copy the workspace into and run the job from; it must not "
                 "exist and is created",
        )
        return opts

    def build(self, role: "Role", workspace: str, cfg: Mapping[str, "CfgVal"]) -> "Role":
        """Raises:
            WorkspaceError: ``job_dir`` exists or ``workspace`` is not a directory."""

        job_dir = cfg.get("job_dir")
        if not job_dir:
            return role
        job_dir = os.path.abspath(str(job_dir))
        try:
            copy_workspace(workspace, job_dir)
        except (FileExistsError, NotADirectoryError) as e:
            raise WorkspaceError(str(e)) from None
        return attrs.evolve(role, image=job_dir)
