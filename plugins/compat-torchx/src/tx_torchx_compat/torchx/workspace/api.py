"""``torchx.workspace.api``: :class:`WorkspaceMixin` (see
:class:`tx_torchx_compat.scheduler_api.WorkspaceMixin`) and TorchX 0.7.0's documented
``walk_workspace``."""
import posixpath
from typing import Any, Dict, Iterator, Tuple

from tx_torchx_compat.scheduler_api import WorkspaceMixin  # noqa: F401
from tx.specs.api import AppDef, Role  # noqa: F401
from tx.specs.runopts import CfgVal, runopts  # noqa: F401

__all__ = ["TORCHX_IGNORE", "WorkspaceMixin", "walk_workspace"]

#: the ignore file of a workspace
TORCHX_IGNORE = ".torchxignore"


def _ignore_spec(fs: Any, path: str, ignore_name: str) -> Any:
    import pathspec  # deferred: only when a workspace is walked (as tx.workspace.api)

    lines = []
    ignore_path = posixpath.join(path, ignore_name)
    if fs.exists(ignore_path):
        with fs.open(ignore_path, "rt") as f:
            lines = [ln.rstrip("\n") for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
    try:  # gitignore rules, as tx's walk_workspace (newer pathspec names them "gitignore")
        return pathspec.PathSpec.from_lines("gitignore", lines)
    except (KeyError, LookupError):
        return pathspec.PathSpec.from_lines("gitwildmatch", lines)


def walk_workspace(fs: Any, path: str, ignore_name: str = TORCHX_IGNORE
                   ) -> Iterator[Tuple[str, Dict[str, Any], Dict[str, Any]]]:
    """Walk directory ``path`` of fsspec filesystem ``fs`` as ``fs.walk(path, detail=True)``
    does (``(dir, {name: info} of subdirectories, {name: info} of files)``, top down),
    leaving out what ``<path>/<ignore_name>`` excludes (the ignore file itself is kept).

    The ignore file's patterns are matched as tx matches them everywhere
    (:func:`tx.workspace.api.walk_workspace`: gitignore rules; TorchX follows
    ``.dockerignore`` rules, where a pattern without ``/`` matches at the top level only).
    """
    spec = _ignore_spec(fs, path, ignore_name)
    stack = [path]
    while stack:
        current = stack.pop()
        for d, dirs, files in fs.walk(current, detail=True, maxdepth=1):
            rel = posixpath.relpath(d, path)
            prefix = "" if rel == "." else rel + "/"
            kept_dirs = {n: info for n, info in dirs.items() if not spec.match_file(prefix + n + "/")}
            kept_files = {n: info for n, info in files.items()
                          if (n == ignore_name and not prefix) or not spec.match_file(prefix + n)}
            yield d, kept_dirs, kept_files
            stack.extend(posixpath.join(d, n) for n in kept_dirs)
