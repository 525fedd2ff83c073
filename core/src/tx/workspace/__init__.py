"""tx.workspace: patch a local directory (the workspace) into what a role runs.

A scheduler that supports workspaces overrides ``Scheduler.workspace_opts`` and
``Scheduler.build_workspace``; the directory kind is built in (:mod:`tx.workspace.dir_workspace`),
container image builds live in the plugins that need them.
"""
from tx.workspace.api import IGNORE_FILE, walk_workspace

__all__ = ["IGNORE_FILE", "walk_workspace"]
