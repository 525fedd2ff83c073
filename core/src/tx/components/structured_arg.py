"""Structured component arguments: one human-friendly CLI value that carries several
primitive ones (TorchX's ``torchx.components.structured_arg``).

* ``--name EXPERIMENT/RUN`` (:class:`StructuredNameArgument`): the experiment and run names
  that trackers group runs by.
* ``-j [[MIN:]NNODES x]NPROC`` (:class:`StructuredJArgument`): nodes (with an elastic
  minimum) and processes per node.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import attrs

from tx.log import get_logger
from tx.specs import named_resources

__all__ = ["DEFAULT_EXPERIMENT_NAME", "StructuredJArgument", "StructuredNameArgument"]

DEFAULT_EXPERIMENT_NAME = "default-experiment"
_J_ELASTIC = re.compile(r"^(\d+):(\d+)x(\d+)$")
_J_NODES = re.compile(r"^(\d+)x(\d+)$")
_J_PROCS = re.compile(r"^(\d+)$")


def _program_name(m: Optional[str], script: Optional[str]) -> str:
    if m:
        return m.rpartition(".")[2]
    return Path(script or "").stem


@attrs.frozen
class StructuredNameArgument:
    """``--name`` split into an experiment name and a run name.

    Attributes:
        experiment_name: groups runs in a tracker (default ``default-experiment``).
        run_name: the app name.
    """

    experiment_name: str
    run_name: str

    def __str__(self) -> str:
        return f"{self.experiment_name}/{self.run_name}"

    @staticmethod
    def parse_from(
        name: str,
        m: Optional[str] = None,
        script: Optional[str] = None,
        default_experiment_name: str = DEFAULT_EXPERIMENT_NAME,
    ) -> "StructuredNameArgument":
        """Parse ``name``: ``EXP/RUN``, ``EXP/`` (run name from the program), ``/RUN`` or
        ``RUN`` (default experiment), ``/`` (both defaulted). The text after the first
        ``/`` is the run name.

        Args:
            name: the ``--name`` value.
            m: the main module; its last part names the run when ``name`` has no run name.
            script: the main script; its stem names the run when neither ``name`` nor ``m`` do.
            default_experiment_name: used when ``name`` has no experiment name.

        Raises:
            ValueError: both or neither of ``m`` and ``script`` are given.
        """
        # TorchX 0.7.0's wording leads each message (its docs show it; callers match on it)
        if not m and not script:
            raise ValueError("No main module or script specified: give --script or -m")
        if m and script:
            raise ValueError("Both main module and script set: give only one of --script and -m")
        experiment, sep, run = name.partition("/")
        if not sep:
            experiment, run = "", name
        return StructuredNameArgument(
            experiment_name=experiment or default_experiment_name,
            run_name=run or _program_name(m, script),
        )


@attrs.frozen
class StructuredJArgument:
    """``-j``: how many nodes, and how many processes on each.

    Attributes:
        nnodes: the (maximum) number of nodes.
        nproc_per_node: processes per node.
        min_nnodes: the fewest nodes an elastic job runs with (equals ``nnodes`` when the
            job is not elastic).
    """

    nnodes: int
    nproc_per_node: int
    min_nnodes: int = attrs.field()

    @min_nnodes.default
    def _min_default(self) -> int:
        return self.nnodes

    @property
    def elastic(self) -> bool:
        """True when the node count may vary (``MIN:MAX`` with MIN < MAX)."""
        return self.min_nnodes != self.nnodes

    @property
    def nnodes_rep(self) -> str:
        """The torchrun ``--nnodes`` value: ``MAX`` or ``MIN:MAX``."""
        return f"{self.min_nnodes}:{self.nnodes}" if self.elastic else str(self.nnodes)

    def __str__(self) -> str:
        return f"{self.nnodes_rep}x{self.nproc_per_node}"

    @staticmethod
    def parse(j: str) -> "StructuredJArgument":
        """Parse ``dist.ddp``'s ``-j``: ``NODESxPROCS``, ``MIN:MAXxPROCS`` or ``PROCS``
        (one node).

        Raises:
            ValueError: another format, a zero count, or MIN > MAX.
        """
        text = j.strip()
        if _J_ELASTIC.match(text):
            lo, hi, procs = (int(x) for x in _J_ELASTIC.match(text).groups())  # type: ignore[union-attr]
        elif _J_NODES.match(text):
            hi, procs = (int(x) for x in _J_NODES.match(text).groups())  # type: ignore[union-attr]
            lo = hi
        elif _J_PROCS.match(text):
            lo = hi = 1
            procs = int(text)
        else:
            raise ValueError(
                f"Invalid format for `-j` {j!r}: use NODESxPROCS (2x4), MIN:MAXxPROCS (1:4x8) or PROCS (8)"
            )
        return StructuredJArgument._checked(j, lo, hi, procs)

    @staticmethod
    def _checked(j: str, lo: int, hi: int, procs: int) -> "StructuredJArgument":
        if hi < 1 or procs < 1:
            raise ValueError(f"invalid -j {j!r}: node and process counts must be at least 1")
        if lo > hi:
            raise ValueError(f"invalid -j {j!r}: the minimum node count {lo} exceeds the maximum {hi}")
        return StructuredJArgument(nnodes=hi, nproc_per_node=procs, min_nnodes=lo)

    @staticmethod
    def parse_from(h: str, j: str) -> "StructuredJArgument":
        """Parse ``dist.spmd``'s ``-j`` for hosts of the named resource ``h``: ``NODES``
        means NODES x (GPUs of ``h``); ``NODESxPROCS`` and ``MIN:MAXxPROCS`` are honoured
        but a PROCS different from the host's GPU count is logged as a warning.

        Raises:
            ValueError: ``-j NODES`` on a host without GPUs, or a malformed ``j``.
            KeyError: ``h`` is not a named resource.
        """

        num_gpus = named_resources[h].gpu
        text = j.strip()
        if _J_PROCS.match(text):
            if num_gpus <= 0:
                raise ValueError(
                    f"nproc_per_node cannot be inferred from GPU count. `{h}` is not a GPU instance."
                    f" Use -j {text}xPROCS (e.g. -j {text}x8)"
                )
            return StructuredJArgument._checked(j, int(text), int(text), num_gpus)
        parsed = StructuredJArgument.parse(text)
        if parsed.nproc_per_node != num_gpus:
            get_logger(__name__).warning(
                "nproc_per_node_mismatch",
                j=j,
                nproc_per_node=parsed.nproc_per_node,
                host=h,
                host_gpus=num_gpus,
                hint=f"use -j {parsed.nnodes_rep} to run one process per GPU",
            )
        return parsed
