"""The failover watcher following many runs (issue 40, docs/scale.md): its calls to the
backend per tick do not grow with the runs it follows, a run listed as its record has it
is neither stepped nor read again, and a run that changes is still seen the next tick.

On the real local_cwd: one run with failover (local_cwd, then local_dir) of ``sleep``, its
app copied as running apps of the same supervisor and its record as runs a watcher follows
(``tx_scheduler_local._clone``). A tick is the watcher's loop body
(``tx.runner._failover_watcher``: ``list_records(..., cache=...)`` then ``failover.poll``);
calls are counted at the schedulers (a call made inside another, local ``list`` describing
an app whose supervisor died, is that call's work). Counts, never times.
"""
from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from tx.runner import Runner, failover
from tx.runner.failover import RunRecord
from tx.specs import AppDef, AppState, Role, make_app_handle
from tx_scheduler_local._clone import clone_run_record, clone_running_app

_STEP = failover.step
_FROM_JSON = RunRecord.from_json.__func__  # type: ignore[attr-defined]


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tuple[Runner, str, Counter]]:
    """A runner, the handle of one running run with failover (not followed by a watcher: a
    test follows its copies), and the counter of its schedulers' calls."""
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    calls: Counter = Counter()
    with Runner("wscale") as runner:
        runner.log_archive = None
        app = AppDef("ws", [Role("w", image=str(tmp_path), entrypoint="sleep", args=["600"])])
        handle = runner.run_with_fallback(app, [("local_cwd", {}), ("local_dir", {})], pending_timeout=3600.0,
                                          watch=False)
        deadline = time.monotonic() + 120
        # until its record says RUNNING (a look's step writes it): copies of a record that
        # still says SUBMITTED would each be stepped, and written, by the first tick
        while runner.status(handle).state != AppState.RUNNING or failover.load_record(handle).live.state != "RUNNING":
            assert time.monotonic() < deadline, "the run did not start"
            time.sleep(0.1)
        depth = [0]
        for name in ("local_cwd", "local_dir"):
            sched = runner.engine.scheduler(name)
            for meth in ("list", "describe", "list_page"):
                real = getattr(sched, meth)

                def counted(*a: Any, _real: Any = real, _key: str = f"{name}.{meth}", **kw: Any) -> Any:
                    if not depth[0]:
                        calls[_key] += 1
                    depth[0] += 1
                    try:
                        return _real(*a, **kw)
                    finally:
                        depth[0] -= 1
                setattr(sched, meth, counted)
        try:
            yield runner, handle, calls
        finally:
            runner.cancel(handle)
            runner.wait(handle, wait_interval=0.2, timeout=60)


def _follow(runner: Runner, handle: str, n: int) -> List[str]:
    """``n`` more runs a watcher follows, each with a running local_cwd app of its own."""
    live = failover.load_record(handle).live
    assert live is not None and live.app_id
    apps = clone_running_app(runner.engine.scheduler("local_cwd").apps_dir, live.app_id, n, prefix=f"c{n}")
    return clone_run_record(handle, apps, watch=True)


def _ticks(runner: Runner, calls: Counter, monkeypatch: pytest.MonkeyPatch, ticks: int = 3
           ) -> List[Dict[str, Any]]:
    """A first watcher tick, then ``ticks`` more: per tick, the scheduler calls, the steps
    taken and the records parsed."""
    steps, parsed = Counter(), Counter()

    def step(*a: Any, **kw: Any) -> Any:
        steps["step"] += 1
        return _STEP(*a, **kw)

    def from_json(cls: Any, data: Any) -> Any:
        parsed["record"] += 1
        return _FROM_JSON(cls, data)
    monkeypatch.setattr(failover, "step", step)
    monkeypatch.setattr(RunRecord, "from_json", classmethod(from_json))
    cache: Dict[str, Any] = {}
    out = []
    for t in range(ticks + 1):
        calls.clear()
        steps.clear()
        parsed.clear()
        records = failover.list_records(unfinished=True, watched=True, cache=cache)
        failover.poll(runner.engine, records)
        out.append({"calls": dict(calls), "steps": steps["step"], "parsed": parsed["record"],
                    "followed": len(records)})
    return out


def test_calls_per_tick_do_not_grow_with_the_runs(world: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """5 runs followed, then 60: every tick is one local_cwd ``list`` (the old watcher: the
    same list, then a lock and a record read per run); no run is stepped and no record is
    read again while nothing changes."""
    runner, handle, calls = world
    _follow(runner, handle, 5)
    few = _ticks(runner, calls, monkeypatch)[1:]
    _follow(runner, handle, 55)
    many = _ticks(runner, calls, monkeypatch)[1:]
    assert few == [{"calls": {"local_cwd.list": 1}, "steps": 0, "parsed": 0, "followed": 5}] * 3, few
    assert many == [{"calls": {"local_cwd.list": 1}, "steps": 0, "parsed": 0, "followed": 60}] * 3, many


def test_a_run_that_changes_is_seen_the_next_tick(world: Any, monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    """Followed runs left alone while they run; one whose app is cancelled (its record
    changed by nobody) is stepped the next tick and recorded CANCELLED, once: the others
    are still not stepped."""
    runner, handle, calls = world
    runs = _follow(runner, handle, 4)
    _ticks(runner, calls, monkeypatch, ticks=1)
    # the first copy's app gets a supervisor of its own: a real app to cancel
    first = failover.load_record(runs[0])
    app = AppDef("ws1", [Role("w", image=str(tmp_path), entrypoint="sleep", args=["600"])])
    own = runner.run(app, "local_cwd")
    app_id = own.rsplit("/", 1)[1]
    data = first.to_json()
    data["hops"][-1]["app_id"] = app_id
    rec = RunRecord.from_json(data)
    Path(failover.record_path(rec.run_id)).write_text(json.dumps(rec.to_json()))
    deadline = time.monotonic() + 60
    while runner.status(own).state != AppState.RUNNING:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    ticks = _ticks(runner, calls, monkeypatch, ticks=1)
    assert ticks[1]["steps"] == 0 and ticks[1]["calls"] == {"local_cwd.list": 1}, ticks
    runner.cancel(make_app_handle("local_cwd", "wscale", app_id))
    deadline = time.monotonic() + 60
    while runner.status(own).state != AppState.CANCELLED:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    ticks = _ticks(runner, calls, monkeypatch, ticks=2)
    assert failover.load_record(runs[0]).final == "CANCELLED"
    assert [t["followed"] for t in ticks] == [4, 3, 3], ticks  # it ended: no longer followed
    assert [t["steps"] for t in ticks] == [1, 0, 0], ticks  # stepped once, the tick after it changed
    assert [t["calls"] for t in ticks] == [{"local_cwd.list": 1}] * 3, ticks
    assert all(failover.load_record(r).final is None for r in runs[1:])
