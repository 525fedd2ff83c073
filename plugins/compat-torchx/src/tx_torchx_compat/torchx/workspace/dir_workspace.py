"""``torchx.workspace.dir_workspace``: TorchX 0.7.0's ``DirWorkspaceMixin`` (copy the
workspace into run option ``job_dir``) and ``TmpDirWorkspaceMixin`` (into a new temporary
directory), for schedulers that derive from them."""
import os
import posixpath
import shutil
import tempfile
from typing import Any, Mapping

from tx.specs.api import Role
from tx.specs.runopts import CfgVal, runopts
from tx_torchx_compat.torchx.workspace.api import WorkspaceMixin, walk_workspace

__all__ = ["DirWorkspaceMixin", "TmpDirWorkspaceMixin"]


def _copy_to_dir(workspace: str, target: str) -> None:
    """Copy the files of ``workspace`` (a local directory or fsspec URL) that its ignore
    file keeps into existing directory ``target``; local files keep their modes."""
    import fsspec  # deferred: only when a workspace is copied

    fs, root = fsspec.core.url_to_fs(workspace)
    local = "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,))
    for d, _dirs, files in walk_workspace(fs, root):
        rel = posixpath.relpath(d, root)
        dst_dir = target if rel == "." else os.path.join(target, *rel.split("/"))
        os.makedirs(dst_dir, exist_ok=True)
        for name in files:
            src, dst = posixpath.join(d, name), os.path.join(dst_dir, name)
            if local:
                shutil.copy2(src, dst)
            else:
                fs.get_file(src, dst)


class DirWorkspaceMixin(WorkspaceMixin[None]):
    """Copies the workspace into the directory run option ``job_dir`` names and makes it
    the role's image (the directory replicas run in); without ``job_dir`` the role is left
    as it is. ``job_dir`` must not exist; its missing parents are created (TorchX creates
    only ``job_dir`` itself)."""

    def workspace_opts(self) -> runopts:
        """The run option ``job_dir``."""
        opts = runopts()
        opts.add("job_dir", type_=str, default=None,
                 help="directory to copy the workspace into and run the job from; must not exist")
        return opts

    def build_workspace_and_update_role(self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]) -> None:
        """Copy ``workspace`` into ``cfg["job_dir"]`` and set ``role.image`` to it.

        Raises:
            FileExistsError: ``job_dir`` exists (a job directory is never reused).
        """
        job_dir: Any = cfg.get("job_dir")
        if job_dir is None:
            return
        job_dir = str(job_dir)
        if os.path.exists(job_dir):
            raise FileExistsError(f"job_dir {job_dir!r} already exists; give a new directory")
        os.makedirs(job_dir)
        try:
            _copy_to_dir(workspace, job_dir)
        except BaseException:
            shutil.rmtree(job_dir, ignore_errors=True)
            raise
        role.image = job_dir


class TmpDirWorkspaceMixin(WorkspaceMixin[None]):
    """Copies the workspace into a new temporary directory (``torchx_workspace*``) and
    makes it the role's image."""

    def build_workspace_and_update_role(self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]) -> None:
        """Copy ``workspace`` into a new temporary directory; set ``role.image`` to it."""
        job_dir = tempfile.mkdtemp(prefix="torchx_workspace")
        _copy_to_dir(workspace, job_dir)
        role.image = job_dir
