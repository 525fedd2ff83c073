"""``torchx.schedulers.local_scheduler``: tx-scheduler-local's ``local_cwd``/``local_dir``
with TorchX 0.7's factory ``create_scheduler(session_name, cache_size=100,
extra_paths=None, image_provider_class=CWDImageProvider)``."""
try:
    from tx_scheduler_local.scheduler import *  # noqa: F401,F403
    from tx_scheduler_local.scheduler import LocalScheduler, create_scheduler  # noqa: F401
except ModuleNotFoundError as _e:
    if _e.name is None or not _e.name.startswith("tx_scheduler_local"):
        raise
    from tx_torchx_compat._missing import require

    require("tx_scheduler_local", "tx-scheduler-local", "torchx.schedulers.local_scheduler")


class CWDImageProvider:
    """Selects ``local_cwd`` in :func:`create_scheduler` (replicas run in the current
    directory; ``role.image`` is ignored)."""


class LocalDirectoryImageProvider:
    """Selects ``local_dir`` in :func:`create_scheduler` (replicas run in ``role.image``,
    an existing directory)."""
