"""tx.workspace: put a local directory (the workspace) into what a role runs.

A scheduler names the workspace kind it uses (``Scheduler.workspace_kind``: ``dir`` for
Slurm and Ray, ``docker`` for local_docker, Kubernetes, AWS Batch and GCP Batch); kinds are
registered by plugins through ``tx_register_workspaces`` and implement
:class:`Workspace`. The ``dir`` kind is built in (:mod:`tx.workspace.dir_workspace`).
"""
from tx.workspace.api import (
    IGNORE_FILE,
    Workspace,
    WorkspaceError,
    find_workspace,
    get_workspace,
    localize_workspace,
    walk_workspace,
)

__all__ = ["IGNORE_FILE", "Workspace", "WorkspaceError", "find_workspace", "get_workspace", "localize_workspace",
           "walk_workspace"]
