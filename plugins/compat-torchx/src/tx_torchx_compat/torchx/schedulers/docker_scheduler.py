"""``torchx.schedulers.docker_scheduler``: tx-scheduler-docker's ``tx_scheduler_docker.scheduler``,
with TorchX 0.7.0's names that subclasses of its docker scheduler use: the constructor
``DockerScheduler(session_name)``, the ``_docker_client`` property, ``_get_app_state(container)``,
``_to_str``; and ``DockerOpts``, ``has_docker``."""
from typing import Any, Dict, List, Optional, TypedDict, Union

from tx.specs.api import AppState
from tx_torchx_compat._missing import reexport

_docker = reexport(globals(), "tx_scheduler_docker.scheduler", "tx-scheduler-docker")

__all__ = [*_docker.__all__, "DockerOpts", "has_docker"]


class DockerOpts(TypedDict, total=False):
    """TorchX 0.7.0's ``local_docker`` run options, as a type (tx's are ``tx runopts
    local_docker``)."""

    copy_env: Optional[List[str]]
    env: Optional[Dict[str, str]]
    privileged: bool


def has_docker() -> bool:
    """Whether a Docker engine answers at ``DOCKER_HOST`` (or the default socket) and the
    ``docker`` SDK is installed."""
    try:
        import docker  # deferred: the docker SDK only when asked (it may not be installed)
    except ImportError:
        return False
    try:
        client = docker.from_env()
    except docker.errors.DockerException:
        return False
    client.close()
    return True


def _to_str(a: Union[str, bytes]) -> str:
    """``a`` as text (bytes are UTF-8 decoded), as Docker's API returns either."""
    return a.decode("utf-8") if isinstance(a, bytes) else a


class DockerScheduler(_docker.DockerScheduler):  # type: ignore[misc,valid-type]
    """tx's ``local_docker`` scheduler with what subclasses of TorchX 0.7.0's
    ``DockerScheduler`` call (NeMo-Run's persistent docker scheduler overrides
    ``_submit_dryrun``, ``schedule``, ``describe``, ``log_iter`` and ``_cancel_existing``
    and calls these).

    Args:
        session_name: the session part of app handles.
        client: a ``docker.DockerClient`` (None: made from the environment when first
            needed); TorchX 0.7.0's constructor takes only ``session_name``.
    """

    def __init__(self, session_name: str, client: Optional[Any] = None) -> None:
        super().__init__(session_name, client)

    @property
    def _docker_client(self) -> Any:
        """The ``docker.DockerClient`` (made on first use).

        Raises:
            tx.schedulers.api.SchedulerError: no engine answers (one line saying how to
                start one).
        """
        return self._docker()

    def _get_app_state(self, container: Any) -> AppState:
        """The state of one ``docker.models.containers.Container`` (its ``status`` and exit
        code), as tx's ``local_docker`` maps it."""
        state = container.attrs.get("State") or {}
        return _docker._states.container_state(container.status, state.get("ExitCode"))


def create_scheduler(session_name: str, client: Optional[Any] = None, **kwargs: Any) -> DockerScheduler:
    """TorchX 0.7.0's factory: a :class:`DockerScheduler` (other scheduler params are
    ignored, as TorchX does)."""
    return DockerScheduler(session_name, client=client)
