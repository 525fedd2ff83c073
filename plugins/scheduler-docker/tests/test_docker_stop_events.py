"""Which engine events are a stop from outside (tx_scheduler_docker._preempted.engine_stops),
on records shaped as Docker Engine's ``GET /events`` documents them
(https://docs.docker.com/reference/api/engine/version/v1.41/#tag/System/operation/SystemEvents:
``docker stop`` is ``kill`` with ``Actor.Attributes.signal``, then ``die``, then ``stop``),
which the tests cannot get from a Docker engine (they run podman's, whose stop records no
such event: test_docker_preempted_startup.py covers podman's ``kill`` and stop for real)."""
from __future__ import annotations

from typing import Any, Dict, Optional

from tx_scheduler_docker._preempted import engine_stops, is_preempted, reason

START, END = 1_700_000_000.0, 1_700_000_100.0


def _info(code: int = 1, grace: int = 20, env: Optional[list] = None) -> Dict[str, Any]:
    return {"Id": "c1", "Name": "/app-train-1",
            "Config": {"StopTimeout": grace, "Env": env or [], "Labels": {"tx.role-name": "train", "tx.replica-id": "1"}},
            "State": {"Status": "exited", "ExitCode": code, "StartedAt": "2023-11-14T22:13:20Z",
                      "FinishedAt": "2023-11-14T22:15:00Z"}}


def _event(action: str, at: float, signal: Optional[str] = None, cid: str = "c1") -> Dict[str, Any]:
    attrs = {"name": "app-train-1", **({"signal": signal} if signal is not None else {})}
    return {"Type": "container", "Action": action, "status": action, "id": cid,
            "Actor": {"ID": cid, "Attributes": attrs}, "time": int(at), "timeNano": int(at * 1e9)}


def test_dockers_stop_is_a_stop_from_outside() -> None:
    info = _info()
    events = [_event("kill", END - 3, "15"), _event("die", END), _event("stop", END + 0.01)]
    stops = engine_stops(events, [info])
    assert stops["c1"].when == END - 3 and stops["c1"].sig == 15, stops
    assert is_preempted(info, stops) and not is_preempted(info, {})
    assert reason([info], stops) == ("preempted: SIGTERM to train[1] (container app-train-1), not sent by tx, "
                                     "before its job noted it (the engine's kill event)")
    assert engine_stops([_event("kill", END - 1, "9")], [info])["c1"].sig == 9  # docker kill
    assert engine_stops([_event("kill", END - 1, "SIGTERM")], [info])["c1"].sig == 15


def test_other_signals_old_kills_and_other_containers_are_not() -> None:
    info = _info()
    assert engine_stops([_event("kill", END - 1, "10")], [info]) == {}  # SIGUSR1 (a stack dump): not a stop
    assert engine_stops([_event("kill", END - 26, "15")], [info]) == {}  # beyond the grace (20 s) + 5 s
    assert engine_stops([_event("kill", START - 5, "15")], [info]) == {}  # before it started (an earlier run)
    assert engine_stops([_event("kill", END - 1, "15", cid="c2")], [info]) == {}
    assert engine_stops([_event("die", END)], [info]) == {}  # an end of its own
    assert "c1" in engine_stops([_event("kill", END - 24, "15")], [info])  # within 20 + 5 s
    # the job's own warning signal, as its TX_PREEMPT_SIGNAL names it
    usr = _info(env=["TX_PREEMPT_SIGNAL=USR1"])
    assert engine_stops([_event("kill", END - 1, "10")], [usr])["c1"].sig == 10
    # the engine's stop sends the container's stop signal (SIGTERM) whatever the job's warning
    assert engine_stops([_event("kill", END - 1, "15")], [usr])["c1"].sig == 15
