"""Registrations of tx-scheduler-docker (entry point ``docker`` in the group ``tx``).

Imports nothing heavy: the ``docker`` SDK is imported by the scheduler and the workspace
kind when they are first used."""
from typing import Callable

from tx import hookimpl

TX_PLUGIN_API = 1


@hookimpl
def tx_register_schedulers(register: Callable[..., None]) -> None:
    """Register ``local_docker`` (one container per replica on this host's engine)."""
    register(
        "local_docker",
        "tx_scheduler_docker.scheduler:create_scheduler",
        description="Docker (or podman's Docker API): one container per replica, a network per app",
        requires=("docker",),
        install="pip install tx-scheduler-docker",
    )


@hookimpl
def tx_register_workspaces(register: Callable[..., None]) -> None:
    """Register the ``docker`` workspace kind (an image with the workspace on top of the
    role's image), used by local_docker and by remote schedulers through the registry."""
    register(
        "docker",
        "tx_scheduler_docker.workspace:DockerWorkspace",
        description="build an image with the workspace on top of the role's image (push to image_repo)",
        install="pip install tx-scheduler-docker",
    )
