"""Helpers for code that runs inside a tx job: ranks, devices, rank-0-first blocks, checkpoints and preemption.

Names and behaviour follow TorchX's ``torchx.distributed``. Each function works both in a
distributed job (a ``torch.distributed`` process group, or a launcher such as ``torchrun``
that sets ``LOCAL_RANK``, ``RANK`` and ``WORLD_SIZE``) and in a plain single process, so
that one script runs either way::
    from tx.distributed import init_pg, on_local_rank0_first, rank

    device = init_pg()                 # nccl on GPU hosts, gloo otherwise
    with on_local_rank0_first():
        download_dataset()             # once per node, before the other ranks read it
    model.to(device)

Checkpoints that survive retries, resubmissions and failover (docs/recovery.md): every
replica launched through the Runner has ``TX_CHECKPOINT_DIR``, the same for every attempt
of the run; :func:`save_checkpoint` writes a ``torch.distributed.checkpoint`` (DCP) there
and marks it complete only once every rank has written; :func:`load_latest_checkpoint`
resumes from the newest complete one::

    from tx.distributed import load_latest_checkpoint, save_checkpoint

    state = {"model": model.state_dict(), "optim": opt.state_dict(), "epoch": 0}
    if load_latest_checkpoint(state) is not None:   # in place, resharded as DCP does
        model.load_state_dict(state["model"]); opt.load_state_dict(state["optim"])
    for epoch in range(state["epoch"], epochs):
        ...
        save_checkpoint({"model": ..., "optim": ..., "epoch": epoch + 1}, step=epoch + 1)

Preemption (docs/recovery.md): :func:`preempted` is True on every rank at the same step
once any rank received the backend's warning (``TX_PREEMPT_SIGNAL``, SIGTERM by default;
``TX_PREEMPT_GRACE`` seconds before the kill, :func:`preempt_grace`); save, then
:func:`exit_preempted` ends the process killed by that signal, which tx records as a
preemption (an infrastructure failure: no ``max_retries`` spent)::

        if preempted():                    # a collective: every rank, same point of the loop
            save_checkpoint(state, step=step)
            exit_preempted()

torch (and fsspec) are imported inside the functions: ``import tx.distributed`` imports
neither.
"""
from __future__ import annotations

import json
import os
import posixpath
import re
import sys
import time
import warnings
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Tuple

from tx.distributed import _preempt
from tx.distributed._preempt import exit_preempted, preempt_grace, preempt_signal, preempted

if TYPE_CHECKING:
    import torch

__all__ = [
    "CHECKPOINT_COMPLETE", "checkpoint_dir", "exit_preempted", "init_pg", "is_local_rank0", "is_rank0",
    "latest_checkpoint", "load_latest_checkpoint", "local_cuda_device", "local_device",
    "local_rank", "on_local_rank0_first", "on_rank0_first", "preempt_grace", "preempt_signal", "preempted",
    "rank", "save_checkpoint", "saving_checkpoint", "world_size",
]

#: the marker :func:`save_checkpoint` writes into a checkpoint once every rank wrote it: one
#: line of JSON, ``{"step": N, "seconds": S, "completed": T}`` (S: the save's duration in
#: seconds; T: when it completed, seconds since the epoch), which tx reads to say what a
#: preempted attempt saved
CHECKPOINT_COMPLETE = ".tx-complete"
#: the environment variable holding the run's checkpoint location (set by the Runner)
_CHECKPOINT_ENV = "TX_CHECKPOINT_DIR"
_RESUME_ENV = "TX_RESUME_FROM"  # tx.config.environ.RESUME_FROM: the handle `tx run --resume` was given
_STEP = re.compile(r"^step-(\d+)$")

_BACKENDS = ("auto", "nccl", "gloo")


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name} must be an integer, got {raw!r}") from None


def _pg_initialized() -> bool:
    import torch.distributed as dist  # deferred: torch only when a helper is called

    return dist.is_available() and dist.is_initialized()


def _has_cuda_devices() -> bool:
    import torch  # deferred: torch only when a helper is called

    # is_available() is True for a CUDA build of torch on a host without GPUs
    return torch.cuda.is_available() and torch.cuda.device_count() > 0


def local_rank() -> int:
    """The rank of this process within its node, from ``LOCAL_RANK`` (set by torchrun and
    tx's ``dist.ddp``); 0 when unset. A process group does not record local ranks, so with
    one initialized and ``LOCAL_RANK`` unset this warns and returns 0.

    Raises:
        ValueError: ``LOCAL_RANK`` is not an integer.
    """
    if "LOCAL_RANK" in os.environ:
        return _env_int("LOCAL_RANK", 0)
    if _pg_initialized():
        warnings.warn(
            "a torch.distributed process group is initialized but LOCAL_RANK is not set; "
            "local_rank() returns 0 (launch with torchrun or tx's dist.ddp, or set LOCAL_RANK)",
            stacklevel=2,
        )
    return 0


def local_cuda_device() -> "torch.device":
    """``torch.device("cuda:<local_rank>")``; prefer :func:`local_device` in code that
    also runs on CPU.

    Raises:
        ValueError: ``LOCAL_RANK`` is not an integer.
    """
    import torch  # deferred: torch only when a helper is called

    return torch.device(f"cuda:{local_rank()}")


def local_device() -> "torch.device":
    """The device this process should put its model and tensors on.

    With a process group: ``cuda:<local_rank>`` if its backend is nccl, else ``cpu``.
    Without one: ``cuda`` if the host has CUDA devices, else ``cpu``.
    """
    import torch  # deferred: torch only when a helper is called

    if _pg_initialized():
        import torch.distributed as dist  # deferred: torch only when a helper is called

        return local_cuda_device() if dist.get_backend() == "nccl" else torch.device("cpu")
    return torch.device("cuda") if _has_cuda_devices() else torch.device("cpu")


def rank() -> int:
    """This process's global rank: the process group's if one is initialized, else
    ``RANK``, else 0. Safe to call in non-distributed code.

    Raises:
        ValueError: ``RANK`` is not an integer.
    """
    if _pg_initialized():
        import torch.distributed as dist  # deferred: torch only when a helper is called

        return dist.get_rank()
    return _env_int("RANK", 0)


def world_size() -> int:
    """The number of processes: the process group's size if one is initialized, else
    ``WORLD_SIZE``, else 1. Safe to call in non-distributed code.

    Raises:
        ValueError: ``WORLD_SIZE`` is not an integer.
    """
    if _pg_initialized():
        import torch.distributed as dist  # deferred: torch only when a helper is called

        return dist.get_world_size()
    return _env_int("WORLD_SIZE", 1)


def is_rank0() -> bool:
    """True on global rank 0, and in a non-distributed process."""
    return rank() == 0


def is_local_rank0() -> bool:
    """True on the first process of each node (local rank 0), e.g. to download once per node."""
    return local_rank() == 0


def init_pg(backend: str = "auto", **kwargs: Any) -> "torch.device":
    """Initialize the default process group and return this process's device.

    Under a torchelastic launcher (torchrun, tx's ``dist.ddp``) the group is the job's
    (``env://`` rendezvous). Run as a plain ``python script.py`` it is a trivial group of
    one process (rank 0, world size 1) on a free localhost port, so the same script works
    both ways.

    Args:
        backend: ``nccl``, ``gloo`` or ``auto`` (nccl when the host has CUDA devices and
            torch has nccl, else gloo).
        kwargs: passed to ``torch.distributed.init_process_group``.

    Returns:
        ``cuda:<local_rank>`` for nccl, ``cpu`` for gloo.

    Raises:
        ValueError: an unknown ``backend``.
        RuntimeError: torch.distributed is not available, or a group is already initialized.
    """
    import torch  # deferred: torch only when a helper is called
    import torch.distributed as dist  # deferred: torch only when a helper is called

    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(_BACKENDS)}, got {backend!r}")
    if not dist.is_available():
        raise RuntimeError("torch.distributed is not available in this build of torch")
    if dist.is_initialized():
        raise RuntimeError("the default process group is already initialized")
    if backend == "auto":
        backend = "nccl" if _has_cuda_devices() and dist.is_nccl_available() else "gloo"
    if dist.is_torchelastic_launched():
        dist.init_process_group(backend=backend, **kwargs)
    else:
        if "init_method" not in kwargs and "store" not in kwargs:
            kwargs["init_method"] = "tcp://127.0.0.1:0"  # port 0: the store picks a free one
        dist.init_process_group(backend=backend, rank=0, world_size=1, **kwargs)
    return local_cuda_device() if backend == "nccl" else torch.device("cpu")


@contextmanager
def _first(is_first: bool) -> Iterator[None]:
    """Run the body on the ``is_first`` processes, then (after a barrier) on the rest.

    Every process enters the barrier exactly once: the others before their body, the
    first ones after theirs, also when their body raises.
    """
    initialized = _pg_initialized()
    if initialized and not is_first:
        import torch.distributed as dist  # deferred: torch only when a helper is called

        dist.barrier()
    try:
        yield
    finally:
        if initialized and is_first:
            import torch.distributed as dist  # deferred: torch only when a helper is called

            dist.barrier()


@contextmanager
def on_rank0_first() -> Iterator[None]:
    """Run the block on rank 0 first, then on every other rank (a no-op without a
    process group). Use it for work the others depend on, e.g. preparing a shared cache::
        with on_rank0_first():
            dataset = load_or_build_cache(path)
    """
    with _first(is_rank0()):
        yield


@contextmanager
def on_local_rank0_first() -> Iterator[None]:
    """As :func:`on_rank0_first`, but local rank 0 of every node goes first: for
    node-local work such as downloading a checkpoint to local disk once per node.
    The barrier is global: the other ranks wait until every node's local rank 0 is done.
    """
    with _first(is_local_rank0()):
        yield


# -- checkpoints ---------------------------------------------------------------------------

def checkpoint_dir() -> Optional[str]:
    """The run's checkpoint location, ``$TX_CHECKPOINT_DIR`` (an fsspec URL or a path, the
    same in every attempt of the run), or None outside a tx job."""
    value = os.environ.get(_CHECKPOINT_ENV, "").strip()
    return value or None


def _root(root: Optional[str]) -> str:
    root = root or checkpoint_dir()
    if not root:
        raise ValueError(f"no checkpoint location: pass root= or run under tx ({_CHECKPOINT_ENV} is unset)")
    return root


def _fs(url: str) -> Tuple[Any, str]:
    import fsspec  # deferred: only when checkpoints are used

    return fsspec.core.url_to_fs(url)


def _join(root: str, name: str) -> str:
    return root.rstrip("/") + "/" + name


def _complete_steps(root: str) -> List[int]:
    fs, path = _fs(root)
    try:
        names = [posixpath.basename(p.rstrip("/")) for p in fs.ls(path, detail=False)]
    except FileNotFoundError:
        return []
    steps = sorted(int(m.group(1)) for m in map(_STEP.match, names) if m)
    return [n for n in steps if fs.exists(posixpath.join(path, f"step-{n:09d}", CHECKPOINT_COMPLETE))]


def latest_checkpoint(root: Optional[str] = None) -> Optional[Tuple[int, str]]:
    """The newest complete checkpoint under ``root`` (default :func:`checkpoint_dir`) as
    ``(step, location)``, or None when there is none. Checkpoints are ``step-<N>``
    directories; one counts only once :func:`save_checkpoint` marked it complete (a save
    cut short by a preemption is ignored).

    Raises:
        ValueError: no ``root`` and no ``TX_CHECKPOINT_DIR``.
    """
    root = _root(root)
    steps = _complete_steps(root)
    return (steps[-1], _join(root, f"step-{steps[-1]:09d}")) if steps else None


@contextmanager
def saving_checkpoint(step: int, root: Optional[str] = None, keep: int = 2) -> Iterator[str]:
    """Count a checkpoint that another library writes (Lightning's ``trainer.save_checkpoint``,
    torchtitan's ``CheckpointManager``, ``torch.save``) as tx counts its own: the block gets the
    directory of checkpoint ``step`` (``step-<9 digits>`` under ``root``, created), every rank
    writes its part there, and once the block ends without an exception every rank waits for
    the others and rank 0 writes the :data:`CHECKPOINT_COMPLETE` marker (with the seconds the
    block took) and deletes the oldest complete checkpoints beyond ``keep``, as
    :func:`save_checkpoint` does. A block that raises leaves no marker: the checkpoint is
    never read (:func:`latest_checkpoint` takes the previous complete one), and tx's record of
    a preempted attempt names the step only once the marker is there::

        with saving_checkpoint(trainer.global_step) as where:
            trainer.save_checkpoint(where + "/lightning.ckpt")   # every rank calls it

    Every rank enters it (a collective when a process group is initialized). Saving a step
    that is complete already removes its marker first.

    Args:
        step: a non-negative number that grows with progress.
        root: the location (default :func:`checkpoint_dir`).
        keep: complete checkpoints to keep (at least 1).

    Yields:
        the checkpoint's location (a path or an fsspec URL, as ``root``).

    Raises:
        ValueError: no location, a negative ``step`` or ``keep`` < 1.
    """
    if step < 0 or keep < 1:
        raise ValueError(f"step must be >= 0 and keep >= 1, got step={step}, keep={keep}")
    t0 = time.monotonic()
    root = _root(root)
    where = _join(root, f"step-{step:09d}")
    fs, path = _fs(where)
    initialized = _pg_initialized()
    marker = posixpath.join(path, CHECKPOINT_COMPLETE)
    if fs.exists(marker):  # saving a complete step again: never let a reader see it half-rewritten
        if rank() == 0:
            fs.rm(marker)
        if initialized:
            import torch.distributed as dist  # deferred: torch only when a helper is called

            dist.barrier()  # no rank writes before the marker is gone
    fs.makedirs(path, exist_ok=True)
    yield where
    if initialized:
        import torch.distributed as dist  # deferred: torch only when a helper is called

        dist.barrier()  # every rank has written its part
    if rank() == 0:
        secs = round(time.monotonic() - t0, 3)
        with fs.open(marker, "wb") as f:
            f.write(json.dumps({"step": step, "seconds": secs,
                                # to the millisecond, cut (never after it happened)
                                "completed": int(time.time() * 1000) / 1000}).encode() + b"\n")
        _, base = _fs(root)
        older = [n for n in _complete_steps(root) if n < step]
        for old in older[:max(0, len(older) - (keep - 1))]:
            fs.rm(posixpath.join(base, f"step-{old:09d}"), recursive=True)
        if _preempt._decided:  # the save after the warning: the run's trackers note it
            _record(f"preempted_at_step_{step}", {"saved_step": step, "save_seconds": secs})


def save_checkpoint(state_dict: Dict[str, Any], step: int, root: Optional[str] = None,
                    keep: int = 2) -> str:
    """Save ``state_dict`` as checkpoint ``step`` with ``torch.distributed.checkpoint.save``
    (https://pytorch.org/docs/stable/distributed.checkpoint.html), then mark it complete.

    Every rank calls it (a collective when a process group is initialized). The checkpoint
    counts for :func:`latest_checkpoint` only once every rank has written and rank 0 has
    written the :data:`CHECKPOINT_COMPLETE` marker (saving a step that is complete already
    removes its marker first: a reader never takes a checkpoint being rewritten, it takes the
    previous complete one); rank 0 then deletes the oldest complete
    checkpoints beyond ``keep`` (and nothing newer than the one just saved):
    :func:`saving_checkpoint` around a DCP save.

    Args:
        state_dict: what to save (tensors, ``state_dict()`` of modules and optimizers,
            picklable values).
        step: a non-negative number that grows with progress (an epoch, a global step).
        root: the location (default :func:`checkpoint_dir`).
        keep: complete checkpoints to keep (at least 1).

    Returns:
        the checkpoint's location.

    Raises:
        ValueError: no location, a negative ``step`` or ``keep`` < 1.
    """
    import torch.distributed.checkpoint as dcp  # deferred: torch only when a helper is called

    with saving_checkpoint(step, root, keep) as where:
        with warnings.catch_warnings():  # DCP warns that a process without a group saves alone
            warnings.filterwarnings("ignore", message="torch.distributed is disabled")
            warnings.filterwarnings("ignore", message="Detected an existing checkpoint")  # a step saved again
            dcp.save(state_dict, checkpoint_id=where, no_dist=not _pg_initialized())
    return where


def _record(key: str, values: Dict[str, Any]) -> None:
    """On rank 0 of a job with trackers (``TX_TRACKERS``), add ``{key: values}`` to the job's
    tracker run (:func:`tx.tracker.app_run_from_env`; MLflow: params ``key.name``). Best
    effort: a tracker that fails is one line on stderr, never the save's failure."""
    if rank() != 0 or not (os.environ.get("TX_TRACKERS") or os.environ.get("TORCHX_TRACKERS") or "").strip():
        return
    try:
        from tx.tracker.api import app_run_from_env  # deferred: only in a job with trackers

        app_run_from_env().add_metadata(**{key: values})
    except Exception as e:  # noqa: BLE001 - the checkpoint is saved; the record is a courtesy
        print(f"tx.distributed: could not record {key} in the run's trackers: {e}", file=sys.stderr, flush=True)


def _why_resumed(root: str) -> str:
    """Why ``root`` holds this run's checkpoints, for :func:`load_latest_checkpoint`'s line."""
    if root.rstrip("/") != (checkpoint_dir() or "").rstrip("/"):
        return "the location given"
    handle = os.environ.get(_RESUME_ENV, "").strip()
    return f"tx run --resume {handle}" if handle else "an earlier attempt of this run"


def load_latest_checkpoint(state_dict: Dict[str, Any], root: Optional[str] = None,
                           announce: bool = True) -> Optional[int]:
    """Load the newest complete checkpoint into ``state_dict`` in place
    (``torch.distributed.checkpoint.load``: tensors are resharded to this run's world size)
    and return its step; None (``state_dict`` untouched) when there is none.

    Every rank calls it. Values that are not tensors are replaced by the saved ones. With
    ``announce`` rank 0 prints to stdout where it resumed from and why (``resumed from
    checkpoint step 3 at URL (tx run --resume HANDLE)``, ``... (an earlier attempt of this
    run)``: a retry, an infra retry or a failover hop of the same run), or ``no checkpoint
    at URL: starting fresh``.

    Raises:
        ValueError: no ``root`` and no ``TX_CHECKPOINT_DIR``.
    """
    import torch.distributed.checkpoint as dcp  # deferred: torch only when a helper is called

    root = _root(root)
    found = latest_checkpoint(root)
    if found is None:
        if announce and rank() == 0:
            print(f"no checkpoint at {root}: starting fresh", flush=True)
        return None
    step, where = found
    why = _why_resumed(root)
    if announce and rank() == 0:
        print(f"resumed from checkpoint step {step} at {root} ({why})", flush=True)
    if why == "an earlier attempt of this run":
        _record(f"resumed_from_step_{step}", {"resumed_step": step})
    with warnings.catch_warnings():  # DCP warns that a process without a group loads alone
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        dcp.load(state_dict, checkpoint_id=where, no_dist=not _pg_initialized())
    return step
