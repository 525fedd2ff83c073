"""AWS Batch calls go through the host's call budget (tx.schedulers.budget, docs/scale.md),
counted at the backend: the requests the proxy in front of moto saw."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tx.schedulers import budget as budget_mod
from tx.specs import AppDef, Resource, Role
from tx_scheduler_aws_batch._client import DEFAULT_CALLS_PER_MINUTE, account_key
from tx_scheduler_aws_batch.scheduler import create_scheduler
from tx_scheduler_aws_batch.testing import Moto

FaultProxy = Any  # the fault_proxy fixture's type, of conftest.py


def test_calls_are_within_the_budget_of_txconfig(fault_proxy: FaultProxy, aws_simple: Moto, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TXCONFIG", raising=False)
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("TX_STATUS_MAX_AGE", "0")  # every describe asks Batch (no shared snapshot)
    (tmp_path / ".txconfig").write_text("[aws_batch]\nmax_calls_per_minute = 600\nmax_call_burst = 2\n")
    budget_mod._reset_for_tests()
    try:
        budget = budget_mod.budget_for("aws_batch", account_key(), DEFAULT_CALLS_PER_MINUTE)
        assert (budget.per_minute, budget.burst) == (600, 2)
        sched = create_scheduler("tx")
        app_id = sched.submit(AppDef("b", roles=[Role("r", image="alpine", entrypoint="echo", args=["hi"], resource=Resource(cpu=1, gpu=0, memMB=128))]),
                              {"queue": aws_simple.queue})
        before, requests = budget.counts()["calls"], len(fault_proxy.bodies)
        start = time.monotonic()
        for _ in range(6):
            assert sched.describe(app_id) is not None
        elapsed = time.monotonic() - start
        calls = budget.counts()["calls"] - before
        assert calls >= 6 and len(fault_proxy.bodies) - requests == calls  # every request went through it
        assert elapsed >= (calls - 2) / 10 - 0.05, (calls, elapsed)  # beyond the burst: 10 per second
    finally:
        budget_mod._reset_for_tests()
