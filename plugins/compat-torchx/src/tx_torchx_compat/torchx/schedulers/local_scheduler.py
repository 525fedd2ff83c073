"""``torchx.schedulers.local_scheduler``: tx-scheduler-local's ``local_cwd``/``local_dir``
with TorchX 0.7's factory ``create_scheduler(session_name, cache_size=100,
extra_paths=None, image_provider_class=CWDImageProvider)``."""
from typing import Any, List, Optional

from tx_torchx_compat._missing import reexport

_local = reexport(globals(), "tx_scheduler_local.scheduler", "tx-scheduler-local")


class CWDImageProvider:
    """Selects ``local_cwd`` in ``create_scheduler`` (replicas run in the current
    directory; ``role.image`` is ignored)."""


class LocalDirectoryImageProvider:
    """Selects ``local_dir`` in ``create_scheduler`` (replicas run in ``role.image``, an
    existing directory)."""


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
        a ``tx_scheduler_local.scheduler.LocalScheduler``.

    Raises:
        ValueError: a bad ``cache_size`` or an unknown ``image_provider_class``.
    """
    if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 1:
        raise ValueError(f"cache_size must be an integer >= 1, got {cache_size!r}")
    if extra_paths:
        kwargs["extra_paths"] = list(extra_paths)
    provider = getattr(image_provider_class, "__name__", None)
    if image_provider_class is None or provider == "CWDImageProvider":
        return _local.create_cwd_scheduler(session_name, **kwargs)
    if provider == "LocalDirectoryImageProvider":
        return _local.create_dir_scheduler(session_name, **kwargs)
    raise ValueError(
        f"image_provider_class must be CWDImageProvider or LocalDirectoryImageProvider, got "
        f"{image_provider_class!r}"
    )
