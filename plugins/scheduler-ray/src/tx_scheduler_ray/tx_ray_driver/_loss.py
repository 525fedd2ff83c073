"""How the driver tells a replica lost to the infrastructure from the replica's own end:
Ray's errors for a lost actor (:func:`infra_reason`), the GCS's verdict on an actor Ray
cannot reach (:func:`verdict`), and a save the warned replica completed since
(:func:`saved_since`).

Standard library and ``ray`` only, like the rest of the driver.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Optional

#: seconds the driver waits for the GCS's verdict on an actor Ray cannot reach: where its
#: node's raylet is gone, the GCS declares the node dead once its health checks fail (Ray's
#: defaults: 5 missed checks, 3 s apart, each given 10 s), and the actor dead with it
VERDICT_S = 60.0


def verdict(ray: Any, actor: Any, error: BaseException, check_cancel: Callable[[], None],
            within: float = VERDICT_S) -> Optional[BaseException]:
    """What became of the actor of a call that raised ``error``.

    Ray raises ``ActorUnavailableError`` where it cannot reach the actor's worker (its process
    or its node's raylet is gone, or the network failed for a moment) before the GCS has
    decided: the actor may come back, or die for a reason the GCS then names ("its node has
    died", once the node's health checks failed). So the actor is asked (``info``) until one
    of them: returns the error that names its death, or None where it answers again (alive:
    its ``wait`` is to be called again). Any other ``error`` is final and returned as it is,
    and so is the last one where ``within`` seconds passed without a verdict.
    ``check_cancel`` is called between the questions (it raises on a cancel).
    """
    from ray.exceptions import ActorUnavailableError, GetTimeoutError

    deadline = time.monotonic() + within
    while isinstance(error, ActorUnavailableError) and time.monotonic() < deadline:
        check_cancel()
        asked = time.monotonic()
        try:
            ray.get(actor.info.remote(), timeout=2.0)
            return None
        except GetTimeoutError:
            continue
        except Exception as e:  # noqa: BLE001 - Ray's answer: unavailable again, or dead
            error = e
        if isinstance(error, ActorUnavailableError):  # answered at once: ask again in a second
            time.sleep(max(0.0, 1.0 - (time.monotonic() - asked)))
    return error


def saved_since(root: str, since: float) -> bool:
    """Whether a checkpoint under ``root`` completed at or after ``since`` (its
    ``step-*/.tx-complete`` marker's modification time, epoch seconds)."""
    try:
        names = os.listdir(root)
    except OSError:
        return False
    for name in names:
        if name.startswith("step-"):
            try:
                if os.stat(os.path.join(root, name, ".tx-complete")).st_mtime >= since:
                    return True
            except OSError:
                continue
    return False


def infra_reason(e: BaseException) -> str:
    """Why the infrastructure lost a replica, in Ray's terms, when ``e`` (raised by
    ``ray.get`` of a call on the replica's actor) says the actor died for a reason outside
    the replica: ``NODE_DIED`` (its node died or was preempted), ``WORKER_DIED`` (the
    actor's worker process died: SIGKILLed from outside, its raylet gone), ``OWNER_DIED``,
    ``RAY_KILL`` (``ray.kill`` from outside the driver); "" for anything else: an error in
    the actor's own code, or Ray's memory monitor killing the worker (exit type
    ``NODE_OUT_OF_MEMORY``: the replica's own out-of-memory).

    Ray's reasons are ``ActorDiedErrorContext.Reason`` (``src/ray/protobuf/common.proto``);
    ``ray.exceptions.ActorDiedError`` carries them only in its text, the GCS's sentences
    ("The actor is dead because its worker process has died. Worker exit type: ...").
    """
    import re

    from ray import exceptions as rx

    text = str(e)
    if isinstance(e, rx.RayActorError):
        if e.actor_init_failed:
            return ""
        if e.preempted:
            return "NODE_DIED: the replica actor's node was preempted"
        if "because its node has died" in text:
            return "NODE_DIED: the replica actor's node died"
        if "because its owner has died" in text:
            return "OWNER_DIED: the replica actor's owner (the driver) died"
        if "killed by `ray.kill`" in text:
            return "RAY_KILL: the replica actor was killed by ray.kill"
        m = re.search(r"Worker exit type: (\w+)", text)
        if m and m.group(1) == "NODE_OUT_OF_MEMORY":
            return ""
        return "WORKER_DIED: the replica actor's worker process died" + (f" ({m.group(1)})" if m else "")
    if isinstance(e, rx.NodeDiedError):
        return "NODE_DIED: the replica actor's node died"
    if isinstance(e, (rx.LocalRayletDiedError, rx.WorkerCrashedError)):
        return "WORKER_DIED: " + type(e).__name__
    return ""
