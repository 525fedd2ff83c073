"""The session's podman engine processes a container's end as Docker does.

podman hands a container's end to conmon's exit command (``podman container cleanup``),
which tears its network down, marks it ``exited`` and applies its restart policy. When that
command fails, nothing says so (its error goes to syslog): the container stays ``stopped``,
restart policies never fire, and Docker's ``POST /containers/ID/wait`` answers only after
podman 4.3's 20 s timeout. moto's Docker mode waits on each node's container in turn, so
every AWS Batch Docker-mode test then took 20 s more per container (40-90 s each in a
two-worker run whose engine base was 49 characters: podman's cleanup refuses a runroot
over 50). This checks the engine the fixtures start, however its base was chosen.
"""
import time
from typing import Any

from tx_scheduler_docker.testing import IMAGE

#: seconds Docker's wait may take for a container that has ended: podman's own bound when
#: the exit command failed is 20 s; a processed end is answered in well under 1 s
WAIT_S = 10.0


def container_end_is_processed(client: Any) -> None:
    """Run a container that exits at once on ``client``'s engine and assert its end was
    processed by the exit command: Docker's wait answers (within :data:`WAIT_S`) and the
    container is then ``exited``, not ``stopped``. Removes the container."""
    ct = client.containers.run(IMAGE, ["true"], detach=True, network_mode="none",
                               labels={"tx.test": "engine-cleanup"})
    try:
        t0 = time.monotonic()
        assert ct.wait(timeout=60)["StatusCode"] == 0
        waited = time.monotonic() - t0
        ct.reload()
        state = ct.attrs["State"]
        assert state["Status"] == "exited", (
            f"the container's end was not processed (conmon's exit command, podman container cleanup, failed?): "
            f"state {state['Status']!r} after a wait of {waited:.1f} s")
        assert waited < WAIT_S, f"Docker's wait took {waited:.1f} s for a container that had ended"
    finally:
        ct.remove(force=True)


def test_a_container_end_is_processed_by_the_exit_command(docker_client: Any) -> None:
    container_end_is_processed(docker_client)
