"""tx-notebook: TorchX's notebook workspace, and running it from the notebook.

In a Jupyter notebook (or IPython)::

    %load_ext tx_notebook

    %%workspacefile train.py
    print("training")

    %tx run -s local_cwd utils.python --script train.py

``%%workspacefile PATH`` writes the cell into the notebook's workspace, an fsspec
``memory://`` directory (:func:`get_workspace`, TorchX's name). ``%tx run`` runs a component
with that workspace on any scheduler, relays the replicas' log lines into the cell as they
come (``role/replica line``) and ends with the state line of ``tx run`` (``tx run: SUCCEEDED
after ...``); :func:`run` does the same from Python. The workspace can also be passed as
``workspace=get_workspace()`` to tx's (or TorchX's) ``Runner.run``/``dryrun`` in the same
process: a ``memory://`` workspace lives in the kernel's memory only.
"""
from __future__ import annotations

from typing import Any

from tx_notebook._run import run, run_line
from tx_notebook.version import __version__
from tx_notebook.workspace import WORKSPACE, get_workspace, workspacefile

__all__ = ["WORKSPACE", "__version__", "get_workspace", "load_ipython_extension", "run", "workspacefile"]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext tx_notebook``: registers the cell magic ``%%workspacefile PATH`` and the
    line magic ``%tx run [-s SCHEDULER] [-cfg K=V,...] [--workspace URL] [--name NAME]
    COMPONENT [ARGS...]``."""

    def _workspacefile(line: str, cell: str) -> None:
        workspacefile(line, cell)

    def _tx(line: str) -> None:
        run_line(line)

    ipython.register_magic_function(_workspacefile, "cell", "workspacefile")
    ipython.register_magic_function(_tx, "line", "tx")
