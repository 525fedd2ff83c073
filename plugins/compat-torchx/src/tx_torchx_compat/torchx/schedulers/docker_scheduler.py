"""``torchx.schedulers.docker_scheduler``: tx-scheduler-docker's ``tx_scheduler_docker.scheduler``,
plus the helper ``_to_str`` that subclasses of TorchX's docker scheduler import."""
from typing import Union

from tx_torchx_compat._missing import reexport

reexport(globals(), "tx_scheduler_docker.scheduler", "tx-scheduler-docker")


def _to_str(a: Union[str, bytes]) -> str:
    """``a`` as text (bytes are UTF-8 decoded), as Docker's API returns either."""
    return a.decode("utf-8") if isinstance(a, bytes) else a
