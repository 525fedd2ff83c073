"""The notebook's workspace: an fsspec ``memory://`` directory that ``%%workspacefile``
cells write into (TorchX's ``torchx.notebook``)."""
from __future__ import annotations

import posixpath

import fsspec

__all__ = ["WORKSPACE", "get_workspace", "workspacefile"]

#: the workspace's URL (TorchX's): an fsspec memory directory of this process
WORKSPACE = "memory://torchx-workspace/"


def get_workspace() -> str:
    """The URL of the notebook's workspace (``memory://torchx-workspace/``), to pass as
    ``workspace=`` to ``Runner.run``/``dryrun`` in this process (a Runner in another
    process cannot read it)."""
    return WORKSPACE


def workspacefile(line: str, cell: str) -> str:
    """What ``%%workspacefile PATH`` does: write ``cell`` (text) to ``PATH`` in the
    workspace, replacing the file; returns its URL and prints one line saying so.

    Raises:
        ValueError: ``line`` names no path, or a path outside the workspace.
    """
    path = line.strip()
    norm = posixpath.normpath(path) if path else ""
    if not norm or norm.startswith(("/", "..")) or norm == ".":
        raise ValueError(f"%%workspacefile: give a path inside the workspace (got {path!r})")
    url = WORKSPACE + norm
    with fsspec.open(url, "wt") as f:
        f.write(cell)
    print(f"Added {norm} to tx workspace {WORKSPACE}")
    return url
