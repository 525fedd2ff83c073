"""The driver states' shared records (``tx_scheduler_ray._plane.driver_state``), without a
head: which looks read a job's ``state.json`` and which reuse what another look (or another
process of the host: a fresh record object reading the same file) read. The same counted at
a real head's dashboard: test_ray_scale.py."""
from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, Iterator, List, Optional

import pytest

from tx_scheduler_ray import _plane

URL = "http://127.0.0.1:1"


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    _plane._PLANES.clear()
    yield
    _plane._PLANES.clear()


class Reads:
    """A ``read`` that counts its calls and answers ``state`` (raises ``error`` when set)."""

    def __init__(self, state: Optional[Dict[str, Any]]) -> None:
        self.state, self.calls, self.error = state, 0, None  # type: Optional[Dict[str, Any]], int, Optional[Exception]

    def __call__(self) -> Optional[Dict[str, Any]]:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return self.state


def _info(status: str, fetched_at: float, end_time: Optional[int] = None) -> Any:
    return SimpleNamespace(status=status, end_time=end_time, fetched_at=fetched_at)


def _other_process() -> None:
    """What another tx process of the host has: no record object read yet."""
    _plane._PLANES.clear()


def test_a_running_jobs_state_is_read_once_per_listing() -> None:
    reads = Reads({"state": "RUNNING", "roles": []})
    listed = _info("RUNNING", time.time())
    looks: List[Any] = [_plane.driver_state(URL, "a", listed, reads) for _ in range(3)]
    _other_process()
    looks.append(_plane.driver_state(URL, "a", listed, reads))
    assert reads.calls == 1 and all(x == reads.state for x in looks)
    later = _info("RUNNING", time.time() + 0.01)  # the next job list: the state may have changed
    reads.state = {"state": "RUNNING", "roles": [], "num_restarts": 1}
    assert _plane.driver_state(URL, "a", later, reads) == reads.state and reads.calls == 2
    assert _plane.driver_state(URL, "b", later, reads) == reads.state and reads.calls == 3  # another job: its own


def test_an_ended_jobs_final_state_is_read_once() -> None:
    end_ms = int(time.time() * 1000)
    reads = Reads({"state": "SUCCEEDED", "roles": []})
    assert _plane.driver_state(URL, "e", _info("SUCCEEDED", time.time(), end_ms), reads) == reads.state
    for _ in range(3):  # later job lists, other processes: the final state is kept
        _other_process()
        assert _plane.driver_state(URL, "e", _info("SUCCEEDED", time.time() + 1, end_ms), reads) == reads.state
    assert reads.calls == 1


def test_an_ended_job_whose_state_does_not_say_so_is_read_again() -> None:
    """The driver had not written its last state when the job was listed ended: the next
    listing reads it again (until it says the app ended, or 30 s after the job's end)."""
    end_ms = int(time.time() * 1000)
    reads = Reads({"state": "RUNNING", "roles": []})
    _plane.driver_state(URL, "s", _info("SUCCEEDED", time.time(), end_ms), reads)
    reads.state = {"state": "SUCCEEDED", "roles": []}
    assert _plane.driver_state(URL, "s", _info("SUCCEEDED", time.time() + 0.01, end_ms), reads) == reads.state
    _plane.driver_state(URL, "s", _info("SUCCEEDED", time.time() + 0.02, end_ms), reads)
    assert reads.calls == 2


def test_a_failed_read_records_nothing() -> None:
    reads = Reads({"state": "RUNNING"})
    reads.error = OSError("the log API is down")
    listed = _info("RUNNING", time.time())
    with pytest.raises(OSError):
        _plane.driver_state(URL, "f", listed, reads)
    reads.error = None
    assert _plane.driver_state(URL, "f", listed, reads) == {"state": "RUNNING"} and reads.calls == 2
