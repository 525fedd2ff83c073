"""The workspace contract, and walking a workspace while honouring its ignore file.

A *workspace* is a local directory (``tx run --workspace DIR``) that tx puts into what the
first role runs. A *workspace kind* says how: ``dir`` (built in) copies it into a job
directory that the replicas run from; ``docker`` (tx-scheduler-docker) builds an image with
it on top of the role's image. A scheduler names the kind it uses
(:attr:`tx.schedulers.Scheduler.workspace_kind`); the Runner looks the kind up in the
plugin registry (``tx_register_workspaces``), so a scheduler never imports the plugin that
implements its kind, and calls :meth:`Workspace.build` before the dryrun.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterator, List, Mapping, Optional


from tx.errors import UserError
from tx.plugins import PluginError, get_registry, not_installed_hint
from tx.specs.runopts import runopts

if TYPE_CHECKING:
    from tx.specs.api import Role
    from tx.specs.runopts import CfgVal, runopts

__all__ = [
    "find_workspace", "get_workspace", "IGNORE_FILE", "IMAGE_REPO_REQUIRED", "localize_workspace",
    "walk_workspace",
    "Workspace", "WorkspaceError",
]

#: ignore file at the workspace root; gitignore syntax (``#`` comments, ``!`` negation)
IGNORE_FILE = ".txignore"

#: the ``cfg`` key, set by ``Scheduler.build_workspace``, that tells an image-building kind
#: whether the scheduler's replicas pull the image from a registry (True: they run
#: elsewhere, so the image must be pushed to ``image_repo``; False: ``runs_on_host``)
IMAGE_REPO_REQUIRED = "image_repo_required"


class Workspace:
    """Base class of workspace kinds (what a ``tx_register_workspaces`` factory returns).

    A kind is created with no arguments, once per use, and must be cheap to create (import
    heavy SDKs inside :meth:`build`).
    """

    #: the registered kind name (``dir``, ``docker`` ...)
    kind: str = ""

    def run_opts(self) -> "runopts":
        """The run options this kind adds to the scheduler's (e.g. ``job_dir``,
        ``image_repo``); they are resolved with the scheduler's own and passed to
        :meth:`build` as ``cfg``. Default: none."""

        return runopts()

    def build(self, role: "Role", workspace: str, cfg: Mapping[str, "CfgVal"]) -> "Role":
        """Put ``workspace`` into what ``role`` runs and return the patched role (a new
        :class:`tx.specs.Role`, e.g. ``attrs.evolve(role, image=new_image)``); ``role``
        itself must not be modified.

        Args:
            role: the first role of the app.
            workspace: path of a local directory.
            cfg: the scheduler's resolved run options (with this kind's), and
                :data:`IMAGE_REPO_REQUIRED` (bool).

        Raises:
            tx.workspace.WorkspaceError: the workspace cannot be built (one line for users).
        """
        raise NotImplementedError


class WorkspaceError(UserError):
    """A workspace could not be built, or its kind is not installed. The message is one
    line written for users."""


def get_workspace(kind: str) -> Workspace:
    """The workspace kind ``kind`` from the plugin registry, created.

    Raises:
        WorkspaceError: no installed plugin registers ``kind`` (the message names the
            distribution to install when tx knows it).
    """

    reg = get_registry().get("workspaces", kind)
    if reg is None:
        hint = not_installed_hint("workspaces", kind)
        raise WorkspaceError(
            f"workspace kind {kind!r} is not installed" + (f": {hint}" if hint else "")
        )
    try:
        factory = reg.load()
    except PluginError as e:
        raise WorkspaceError(str(e)) from None
    return factory()


def find_workspace(kind: str) -> Optional[Workspace]:
    """Like :func:`get_workspace`, but None where the kind is not installed."""
    try:
        return get_workspace(kind)
    except WorkspaceError:
        return None


def localize_workspace(workspace: str) -> str:
    """The local directory of ``workspace``: a path as given, a ``file://`` URL's path
    (TorchX's CLI default is ``file://$PWD``), and for any other fsspec URL
    (``memory://torchx-workspace/`` of :func:`tx_notebook.get_workspace`, ``s3://...``) a
    new temporary directory (``tx-workspace-*`` under the system's temp directory) holding
    a copy of its files, left in place for the job that runs from it.

    A ``memory://`` workspace lives in the process that wrote it: only a Runner in that
    process (a notebook's kernel) can read it.

    Raises:
        WorkspaceError: the URL's protocol is unknown or not installed, or it names no
            directory with files (nothing is left behind).
    """
    if workspace.startswith("file://"):
        return workspace[len("file://"):] or "."
    if "://" not in workspace:
        return workspace
    import fsspec  # deferred: fsspec only for a workspace given as a URL
    # deferred with it: shutil (zlib, bz2, lzma) and tempfile load on no other path of `tx run`
    import shutil
    import tempfile

    try:
        fs, root = fsspec.core.url_to_fs(workspace)
        root = root.rstrip("/")
        files = [p for p in fs.find(root) if not fs.isdir(p)] if fs.isdir(root) else []
    except (ValueError, ImportError, OSError) as e:
        raise WorkspaceError(f"workspace {workspace!r}: {e}") from None
    if not files:
        raise WorkspaceError(f"workspace {workspace!r} is not a directory with files")
    dest = tempfile.mkdtemp(prefix="tx-workspace-")
    try:
        for path in files:
            local = os.path.join(dest, *path[len(root):].strip("/").split("/"))
            os.makedirs(os.path.dirname(local), exist_ok=True)
            with fs.open(path, "rb") as src, open(local, "wb") as out:
                shutil.copyfileobj(src, out)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)  # leave nothing half-made
        raise
    return dest


def _patterns(root: str, ignore_name: str) -> List[str]:
    path = os.path.join(root, ignore_name)
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        return [ln.rstrip("\n") for ln in f if ln.strip() and not ln.lstrip().startswith("#")]


def _spec(pathspec: Any, lines: List[str]) -> Any:
    """A gitignore-style spec: pathspec's ``gitignore`` style where it has one (the
    ``gitwildmatch`` name is deprecated in newer releases), else ``gitwildmatch``."""
    try:
        return pathspec.PathSpec.from_lines("gitignore", lines)
    except (KeyError, LookupError):
        return pathspec.PathSpec.from_lines("gitwildmatch", lines)


def walk_workspace(root: str, ignore_name: str = IGNORE_FILE) -> Iterator[str]:
    """Yield the paths (relative to ``root``, ``/``-separated) of the files in the
    workspace that ``<root>/<ignore_name>`` does not exclude. The ignore file itself is kept.

    Raises:
        NotADirectoryError: ``root`` is not a directory.
    """
    if not os.path.isdir(root):
        raise NotADirectoryError(f"workspace {root!r} is not a directory")

    import pathspec  # deferred: pathspec (30 modules) only when a workspace is walked

    spec = _spec(pathspec, _patterns(root, ignore_name))
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
        dirnames[:] = [d for d in dirnames if not spec.match_file(rel_dir + d + "/")]
        for name in filenames:
            rel = rel_dir + name
            if name == ignore_name and not rel_dir or not spec.match_file(rel):
                yield rel
