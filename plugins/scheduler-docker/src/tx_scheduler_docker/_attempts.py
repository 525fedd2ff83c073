"""Replicas the engine lost, started again (run option ``infra_retries``): a lost container
is renamed ``<name>.infra<attempt>`` and kept with its logs, and a new one of its name,
configuration and labels (``tx.attempt`` added) takes its place. Used by
:meth:`tx_scheduler_docker.scheduler.DockerScheduler.describe`.
"""
from __future__ import annotations

import os
from typing import Any, Dict

from tx import get_logger

from tx_scheduler_docker import _states
from tx_scheduler_docker._client import api_reason
from tx_scheduler_docker._preempted import LABEL_RETRIED_BECAUSE
from tx_scheduler_docker._status import CANCELLED_SUFFIX, LABEL_ATTEMPT, RETIRED, attempt_of, name_of
from tx_scheduler_docker.request import LABEL_APP_ID, LABEL_VERSION, PREEMPT_NOTE_ENV
from tx_scheduler_docker.version import __version__

__all__ = ["start_again", "start_quietly"]

log = get_logger(__name__)

#: the ``HostConfig`` fields of a container that :func:`tx_scheduler_docker.request.build_request`
#: sets, copied from a lost container to its replacement
_HOST_CONFIG = ("Binds", "Privileged", "Init", "Memory", "MemorySwap", "ShmSize", "NanoCpus", "DeviceRequests",
                "Devices", "PortBindings", "RestartPolicy")


def start_again(client: Any, app_id: str, info: Dict[str, Any], attempt: int, why: str = "") -> None:
    """Start a replica whose container the engine lost, as attempt ``attempt``: rename
    the lost container ``<name>.infra<its attempt>`` (kept, with its logs), then create
    and start a container of the lost one's name, configuration and labels
    (``tx.attempt`` added; ``why``, the ended attempt's reason where given, in
    :data:`tx_scheduler_docker._preempted.LABEL_RETRIED_BECAUSE`) from its inspect record (the engine API's create body is
    its ``Config`` with ``HostConfig``: https://docs.docker.com/reference/api/engine/);
    the ``on-failure`` retries its runs spent stay spent (one at least where it had ended
    before: podman's reset at boot zeroes ``RestartCount``). Another tx process doing the same at once makes the rename or the create fail
    (the engine's names are unique): that one did it. Other errors are logged; the
    next describe tries again."""
    import docker

    name = RETIRED.sub("", name_of(info))
    if not RETIRED.search(name_of(info)):
        try:
            client.api.rename(info["Id"], f"{name}.infra{attempt_of(info)}")
        except docker.errors.APIError as e:  # renamed or removed by another tx, or cancelled
            log.info("lost container not renamed; another tx process is restarting it", container=name,
                     error=api_reason(e))
            return
    cfg = dict(info.get("Config") or {})
    cfg["Labels"] = {k: v for k, v in (cfg.get("Labels") or {}).items() if k != LABEL_RETRIED_BECAUSE}
    cfg["Labels"].update({LABEL_ATTEMPT: str(attempt), **({LABEL_RETRIED_BECAUSE: why} if why else {})})
    # the attempt's own preemption note (an earlier attempt's is not this one's warning)
    cfg["Env"] = [_note_of_attempt(str(v), attempt) for v in (cfg.get("Env") or [])]
    # what build_request sets (podman's inspect adds defaults its own create refuses, such
    # as Ulimits named RLIMIT_NOFILE)
    host = {k: v for k, v in (info.get("HostConfig") or {}).items() if k in _HOST_CONFIG and v}
    policy = dict(host.get("RestartPolicy") or {})
    if policy.get("Name") == "on-failure":  # the user's retries the lost container spent stay spent
        spent = int(info.get("RestartCount") or 0)
        if not spent and _states._is_set((info.get("State") or {}).get("FinishedAt")):
            spent = 1  # it ended before and was restarted; podman's reset at boot zeroed the count
        left = int(policy.get("MaximumRetryCount") or 0) - spent
        host["RestartPolicy"] = {"Name": "on-failure", "MaximumRetryCount": left} if left > 0 else {"Name": "no"}
    network = f"tx-{app_id}"
    host["NetworkMode"] = network
    body = {**cfg, "HostConfig": host, "NetworkingConfig": {"EndpointsConfig": {network: {}}}}
    try:
        try:
            client.networks.get(network)
        except docker.errors.NotFound:  # removed meanwhile (every container had ended)
            client.networks.create(network, driver="bridge", labels={LABEL_APP_ID: app_id,
                                                                     LABEL_VERSION: __version__})
        created = client.api.create_container_from_config(body, name)
    except docker.errors.APIError as e:
        # the name is taken: another tx process created it (Docker: 409; podman: 500, "already in use")
        if getattr(e, "status_code", None) == 409 or "already in use" in api_reason(e):
            log.info("replica already started again by another tx process", container=name)
        else:
            log.warning("cannot start the lost replica again", container=name, error=api_reason(e))
        return
    try:  # a cancel that renamed the lost container meanwhile (by its id) cancels the new one
        cancelled = name_of(client.api.inspect_container(info["Id"])).endswith(CANCELLED_SUFFIX)
    except docker.errors.APIError:
        cancelled = False
    if cancelled:
        try:
            client.api.rename(created["Id"], name + CANCELLED_SUFFIX)
        except docker.errors.APIError as e:
            log.warning("cannot mark container cancelled", container=name, error=api_reason(e))
        return
    start_quietly(client, created)
    log.info("started a replica the engine lost again", app_id=app_id, container=name, attempt=attempt)

def _note_of_attempt(entry: str, attempt: int) -> str:
    """An environment entry ``K=V``; ``TX_PREEMPT_NOTE=<dir>/.tx-preempt-<name>.<n>`` made
    attempt ``attempt``'s."""
    key, _, value = entry.partition("=")
    if key != PREEMPT_NOTE_ENV or "." not in os.path.basename(value):
        return entry
    return f"{key}={value.rsplit('.', 1)[0]}.{attempt}"


def start_quietly(client: Any, info: Dict[str, Any]) -> None:
    """Start a container tx created to retry a lost replica (started already: nothing)."""
    try:
        client.api.start(info["Id"])
    except Exception as e:  # noqa: BLE001 - the next describe tries again
        log.warning("cannot start container", container=str(info.get("Id"))[:12], error=str(e))
