"""A finished or cancelled app gives back everything it held on the Ray head: no placement
group of it left unremoved, no actor of it alive, every CPU free again, whenever the cancel
came (right after submit, while the driver reserves resources, while running)."""
from __future__ import annotations

import os
import time
import uuid
from typing import Any, Dict, List

import requests

from tx.specs import AppState

from tx_scheduler_ray.testing import NUM_CPUS


def _state_api(url: str, what: str) -> List[Dict[str, Any]]:
    r = requests.get(f"{url}/api/v0/{what}", params={"limit": 10000, "detail": 1}, timeout=30)
    r.raise_for_status()
    return r.json()["data"]["result"]["result"]


def _held(url: str) -> Dict[str, Any]:
    """What apps hold on the head: placement groups not removed, live actors, CPUs in use."""
    pgs = [p["name"] for p in _state_api(url, "placement_groups") if p["state"] != "REMOVED"]
    actors = [a["class_name"] for a in _state_api(url, "actors") if a["state"] == "ALIVE"]
    usage = requests.get(f"{url}/api/cluster_status", timeout=30).json()["data"]["clusterStatus"]
    used = ((usage.get("loadMetricsReport") or {}).get("usage") or {}).get("CPU", [0, NUM_CPUS])[0]
    return {"placement groups": pgs, "actors": actors, "CPUs in use": used}


def _released(url: str, timeout: float = 30) -> Dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        held = _held(url)
        if not any(held.values()) or time.monotonic() > deadline:
            return held
        time.sleep(0.5)


def test_cancel_at_any_moment_gives_everything_back(apps: Any, ray_head: str) -> None:
    assert _released(ray_head) == {"placement groups": [], "actors": [], "CPUs in use": 0}
    sleeper = apps.role("s", "echo started; sleep 600", replicas=2)
    # cancelled right after submit, before its driver started
    early = apps.submit([sleeper], name="early")
    apps.sched.cancel(early)
    # one that holds every CPU, and one waiting behind it for its placement group
    hog = apps.submit([apps.role("hog", "echo started; sleep 600", replicas=NUM_CPUS)], name="hog")
    assert apps.wait_for(hog, lambda d: d is not None and d.state == AppState.RUNNING).state == AppState.RUNNING
    waiting = apps.submit([sleeper], name="waiting")
    desc = apps.wait_for(waiting, lambda d: d is not None and "placement group" in d.msg)
    assert desc.state == AppState.PENDING and "not enough free resources" in desc.msg, desc
    apps.sched.cancel(waiting)
    apps.sched.cancel(hog)
    for app_id in (early, waiting, hog):
        assert apps.wait(app_id).state == AppState.CANCELLED, app_id
    assert _released(ray_head) == {"placement groups": [], "actors": [], "CPUs in use": 0}
    # and the head runs the next app at once
    nxt = apps.submit([apps.role("next", "echo next", replicas=NUM_CPUS)], name="next")
    assert apps.wait(nxt, timeout=60).state == AppState.SUCCEEDED
    assert _released(ray_head) == {"placement groups": [], "actors": [], "CPUs in use": 0}


def _drivers_of(name: str) -> List[int]:
    """The pids of tx's Ray drivers whose job metadata names the app ``name``."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if b"tx_ray_driver" not in argv:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                if name.encode() in f.read():
                    pids.append(int(pid))
        except OSError:
            continue
    return pids


def test_the_driver_is_the_process_ray_stops(apps: Any, ray_head: str) -> None:
    """``ray job stop`` signals the entrypoint's process and the children it has at that
    moment: a shell between Ray and the driver let a stop right after submit kill only the
    shell, and the driver ran on with its placement group (CI, stop 46)."""
    name = f"parent-{uuid.uuid4().hex[:8]}"
    app_id = apps.submit([apps.role("s", "echo started; sleep 600", replicas=1)], name=name)
    apps.wait_for(app_id, lambda d: d is not None and d.state == AppState.RUNNING)
    (pid,) = _drivers_of(name)
    with open(f"/proc/{pid}/stat") as f:
        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
    with open(f"/proc/{ppid}/comm") as f:
        parent = f.read().strip()
    assert parent not in ("sh", "dash", "bash"), f"the driver's parent is {parent}: Ray's stop would not reach it"
    apps.sched.cancel(app_id)
    assert apps.wait(app_id).state == AppState.CANCELLED
    assert _released(ray_head) == {"placement groups": [], "actors": [], "CPUs in use": 0}
