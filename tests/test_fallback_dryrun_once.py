"""``tx run --fallback`` dry-runs each hop of the chain once, the first included (issue 41:
it was dry-run twice, once by the command and once when the run was created, building its
workspace twice), and ``--dryrun`` prints what is submitted: the run's job id. Counted with
a plugin registered through tx.testing that receives every runner event, around the
``tx`` command's own code (in this process) on the real local schedulers."""
from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any, List

import pytest

import tx
from tx.cli.main import main
from tx.testing import register_plugin


class _Dryruns:
    """Notes the scheduler of every dryrun event."""

    def __init__(self) -> None:
        self.seen: List[str] = []

    @tx.hookimpl
    def tx_on_event(self, event: Any) -> None:
        if event.api == "dryrun":
            self.seen.append(event.scheduler)


@pytest.fixture
def in_tx_env(tx_env, tmp_path, monkeypatch):
    for k in ("TX_STATE_DIR", "HOME", "TMPDIR"):
        monkeypatch.setenv(k, tx_env[k])
    monkeypatch.delenv("TXCONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    return Path(tx_env["TX_STATE_DIR"])


def test_a_run_with_fallback_dry_runs_each_hop_once(in_tx_env, tmp_path, capsys):
    counter = _Dryruns()
    with register_plugin(counter, name="count-dryruns"):
        code = main(["run", "--detach", "-s", "local_cwd", "--fallback", "local_dir", "utils.sh",
                     "--image", str(tmp_path), "true"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert collections.Counter(counter.seen) == {"local_cwd": 1, "local_dir": 1}, counter.seen
    handle = out.out.splitlines()[0]
    rec = json.loads((in_tx_env / "runs" / f"{handle.rsplit('/', 1)[1]}.json").read_text())
    assert [h["scheduler"] for h in rec["hops"]] == ["local_cwd"] and rec["hops"][0]["app_id"]


def test_dryrun_of_a_run_with_fallback_checks_every_hop_once_and_prints_the_run_s_job_id(in_tx_env, tmp_path,
                                                                                         capsys):
    counter = _Dryruns()
    with register_plugin(counter, name="count-dryruns"):
        code = main(["run", "--dryrun", "-s", "local_cwd", "--fallback", "local_dir", "utils.sh",
                     "--image", str(tmp_path), "true"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert collections.Counter(counter.seen) == {"local_cwd": 1, "local_dir": 1}, counter.seen
    assert "TX_JOB_ID: local_cwd://tx/run-" in out.out, out.out  # the run's handle, as every hop gets it
    assert not (in_tx_env / "runs").exists() or not list((in_tx_env / "runs").glob("run-*.json"))
