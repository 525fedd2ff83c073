"""``torchx.schedulers.local_scheduler``: tx-scheduler-local's ``local_cwd``/``local_dir``
with TorchX 0.7's factory ``create_scheduler(session_name, cache_size=100,
extra_paths=None, image_provider_class=CWDImageProvider)``."""
from tx_torchx_compat._missing import reexport

reexport(globals(), "tx_scheduler_local.scheduler", "tx-scheduler-local")


class CWDImageProvider:
    """Selects ``local_cwd`` in ``create_scheduler`` (replicas run in the current
    directory; ``role.image`` is ignored)."""


class LocalDirectoryImageProvider:
    """Selects ``local_dir`` in ``create_scheduler`` (replicas run in ``role.image``, an
    existing directory)."""
