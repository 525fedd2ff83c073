"""``torchx.schedulers.local_scheduler``.

* ``create_scheduler(session_name, cache_size=100, extra_paths=None,
  image_provider_class=CWDImageProvider)`` (TorchX 0.7's factory) makes tx-scheduler-local's
  ``local_cwd``/``local_dir`` scheduler, whose apps outlive the process (``tx status``,
  ``tx log`` from another shell); roles' mounts it would run without are dropped with a
  warning, as TorchX's local scheduler ignores mounts (tx's refuses them).
* ``LocalScheduler`` and what projects that subclass it import (``LocalOpts``,
  ``ImageProvider``, ``CWDImageProvider``, ``LocalDirectoryImageProvider``,
  ``ReplicaParam``, ``PopenRequest``, ``_LocalAppDef``, ``_LocalReplica``, ``LogIterator``,
  ``STDOUT_LOG``/``STDERR_LOG``/``COMBINED_LOG``, ``AppId``, ``_join_PATH``) are TorchX
  0.7.0's in-process local scheduler (:mod:`tx_torchx_compat._torchx_local`).
"""
from typing import Any, List, Optional

from tx.schedulers.ids import make_unique  # noqa: F401 - TorchX's local_scheduler has it
from tx_torchx_compat._missing import reexport
from tx_torchx_compat.scheduler_api import IgnoresMounts

_local = reexport(globals(), "tx_scheduler_local.scheduler", "tx-scheduler-local")

from tx_torchx_compat._torchx_local import (  # noqa: E402,F401 - after reexport: these names win
    COMBINED_LOG,
    ENV_CUDA_VISIBLE_DEVICES,
    STDERR_LOG,
    STDOUT_LOG,
    AppId,
    AppName,
    CWDImageProvider,
    ImageProvider,
    LocalDirectoryImageProvider,
    LocalOpts,
    LocalScheduler,
    LogIterator,
    PopenRequest,
    ReplicaParam,
    RoleName,
    _join_PATH,
    _LocalAppDef,
    _LocalReplica,
)


class _TorchxLocal(IgnoresMounts, _local.LocalScheduler):  # type: ignore[misc,valid-type]
    """tx's local scheduler as ``create_scheduler`` returns it: mounts dropped with a warning."""


def create_scheduler(
    session_name: str,
    cache_size: int = 100,
    extra_paths: Optional[List[str]] = None,
    image_provider_class: Any = None,
    **kwargs: Any,
) -> Any:
    """TorchX 0.7's ``local_scheduler.create_scheduler``: a ``local_cwd`` scheduler, or
    ``local_dir`` when ``image_provider_class`` is a class named
    ``LocalDirectoryImageProvider``.

    Args:
        session_name: the session part of app handles.
        cache_size: TorchX's bound on finished apps kept in memory (>= 1); tx keeps every
            app on disk under ``state_dir``, so the value is checked and otherwise unused.
        extra_paths: directories put first on every replica's PATH (as TorchX's).
        image_provider_class: None, ``CWDImageProvider`` or ``LocalDirectoryImageProvider``
            (matched by class name, so TorchX's own classes work too).
        kwargs: ``tx_scheduler_local.scheduler.LocalScheduler``'s keyword arguments
            (``state_dir``, ``cuda_device_count``, ``supervisor``); others are ignored.

    Returns:
        a ``tx_scheduler_local.scheduler.LocalScheduler`` (of a subclass whose
        ``submit_dryrun`` drops the mounts tx's refuses, with a warning, as TorchX does).

    Raises:
        ValueError: a bad ``cache_size`` or an unknown ``image_provider_class``.
    """
    if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 1:
        raise ValueError(f"cache_size must be an integer >= 1, got {cache_size!r}")
    if extra_paths:
        kwargs["extra_paths"] = list(extra_paths)
    provider = getattr(image_provider_class, "__name__", None)
    if image_provider_class is None or provider == "CWDImageProvider":
        sched = _local.create_cwd_scheduler(session_name, **kwargs)
    elif provider == "LocalDirectoryImageProvider":
        sched = _local.create_dir_scheduler(session_name, **kwargs)
    else:
        raise ValueError(
            f"image_provider_class must be CWDImageProvider or LocalDirectoryImageProvider, got "
            f"{image_provider_class!r}"
        )
    sched.__class__ = _TorchxLocal  # the factories' instance, its mounts TorchX's way
    return sched
