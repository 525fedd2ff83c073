"""``torchx.schedulers.ray_scheduler``: tx-scheduler-ray's ``tx_scheduler_ray.scheduler``,
with TorchX 0.7.0's constructors ``RayScheduler(session_name, ray_client=None)`` and
``create_scheduler(session_name, ray_client=None, **kwargs)``."""
import importlib.util
from typing import Any, Optional

from tx_torchx_compat._missing import reexport
from tx_torchx_compat.scheduler_api import IgnoresMounts

_ray = reexport(globals(), "tx_scheduler_ray.scheduler", "tx-scheduler-ray")


def has_ray() -> bool:
    """Whether the Ray SDK (``ray``) is installed here (found, not imported)."""
    return importlib.util.find_spec("ray") is not None


class RayScheduler(IgnoresMounts, _ray.RayScheduler):  # type: ignore[misc,valid-type]
    """tx's Ray scheduler, constructed as TorchX 0.7.0's; roles' mounts are dropped with a
    warning, as TorchX ignores them (tx's refuses them).

    Args:
        session_name: the session part of app handles.
        ray_client: a ``ray.job_submission.JobSubmissionClient`` used for every job
            (submit, status, logs, stop, list) instead of one per dashboard address; its
            address (``get_address()``) becomes the default dashboard. None: clients are
            made from ``dashboard_address``/``$RAY_ADDRESS`` as tx does.
        kwargs: tx's own keyword arguments (``dashboard_address``).
    """

    def __init__(self, session_name: str, ray_client: Optional[Any] = None, **kwargs: Any) -> None:
        if ray_client is not None and "dashboard_address" not in kwargs:
            get_address = getattr(ray_client, "get_address", None)
            address = get_address() if callable(get_address) else getattr(ray_client, "_address", None)
            if address:
                kwargs["dashboard_address"] = str(address)
        super().__init__(session_name, **kwargs)
        self._ray_client = ray_client

    def _job_client(self, url: str) -> Any:
        if self._ray_client is not None:
            return self._ray_client
        return super()._job_client(url)


def create_scheduler(session_name: str, ray_client: Optional[Any] = None, **kwargs: Any) -> RayScheduler:
    """TorchX 0.7.0's factory: a :class:`RayScheduler`; other keyword arguments
    (scheduler params) but ``dashboard_address`` are ignored, as TorchX does."""
    own = {k: v for k, v in kwargs.items() if k == "dashboard_address"}
    return RayScheduler(session_name, ray_client=ray_client, **own)
