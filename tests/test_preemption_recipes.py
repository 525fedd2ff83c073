"""The recipes of docs/preemption-recipes.md, run exactly as the page has them: each code block
marked ``<!-- recipe: NAME -->`` is written to a file and run by ``tx run -s local_cwd
dist.ddp -j 1x2`` (two ranks over gloo); once it trains, rank 1 alone gets SIGTERM from
outside (a warning tx did not send). Both ranks save the same step and leave as preempted,
tx records the attempt as ``infra`` with that step (``saved_step``, ``save_seconds``), the
next attempt resumes there (``resumed_step``, and the job's own words) and the app
SUCCEEDS."""
from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path
from typing import Dict, Tuple

import pytest

from tx.testing.backends import require_module
from tx.testing.preemption import app_pids, until

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "preemption-recipes.md"
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")

pytestmark = pytest.mark.slow
require_module("torch", "the recipes train with torch: pip install torch==2.13.0")


def recipes() -> Dict[str, str]:
    """The page's recipes: ``{name: the code of the fenced block after its marker}``."""
    return dict(re.findall(r"<!-- recipe: ([\w-]+) -->\n```python\n(.*?)```\n", PAGE.read_text(), re.S))


def _status(tx, handle: str) -> dict:
    p = tx("status", "--json", handle)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _preempt_and_resume(tx, tx_env, tmp_path: Path, name: str, running: str) -> Tuple[dict, str]:
    """Run recipe ``name`` on two ranks, SIGTERM rank 1 once the log has ``running``; the
    final ``tx status --json`` and ``tx log`` once the app ended."""
    script = tmp_path / f"{name}.py"
    script.write_text(recipes()[name])
    p = tx("run", "--detach", "-s", "local_cwd", "-cfg", "preempt_grace=30", "dist.ddp", "-j", "1x2", "--script",
           str(script), timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    handle = p.stdout.strip()
    app_id = handle.rsplit("/", 1)[1]
    out = Path(tx_env["TMPDIR"]) / f"tx-{os.getuid()}" / "tx" / app_id / name / "0" / "stdout.log"  # role: the script
    state = Path(tx_env["TX_STATE_DIR"]) / "local" / "apps" / app_id / "state.json"

    def ended() -> bool:
        return state.exists() and json.loads(state.read_text() or "{}").get("state") in TERMINAL

    until(lambda: (out.exists() and running in out.read_text()) or ended(), timeout=180, every=0.2)
    assert not ended(), tx("log", handle).stdout[-4000:]
    (worker,) = app_pids(app_id, "RANK=1", "LOCAL_RANK=1")
    os.kill(worker, signal.SIGTERM)  # from outside, to rank 1 alone
    until(ended, timeout=300, every=0.3)
    return _status(tx, handle), tx("log", handle).stdout


def _check(status: dict, log: str) -> int:
    """The app SUCCEEDED after one infra attempt that saved step N, the next resumed from N;
    returns N."""
    assert status["state"] == "SUCCEEDED", (status, log[-4000:])
    first, second = status["attempts"]
    assert first["kind"] == "infra" and first["retried"], first
    step = first["saved_step"]
    assert step is not None and first["save_seconds"] is not None and second["resumed_step"] == step, status
    assert re.search(rf"preempted: saved step {step}\n", log), log[-4000:]
    assert re.search(r"done at step 40\n", log), log[-4000:]
    return step


def test_the_plain_loop_recipe_saves_on_preemption_and_resumes_there(tx, tx_env, tmp_path):
    status, log = _preempt_and_resume(tx, tx_env, tmp_path, "plain-loop", "step 5\n")
    step = _check(status, log)
    assert re.search(rf"resumed from checkpoint step {step} at \S+ \(an earlier attempt of this run\)\n", log), log


def test_the_lightning_recipe_saves_on_preemption_and_resumes_there(tx, tx_env, tmp_path):
    require_module("pytorch_lightning", "the Lightning recipe: pip install pytorch-lightning==2.6.6")
    status, log = _preempt_and_resume(tx, tx_env, tmp_path, "lightning", "step 5\n")
    step = _check(status, log)
    assert re.search(rf"training from step {step}\n", log), log[-4000:]  # Lightning's own loop resumed there
    assert "SIGTERMException" not in log and "Received SIGTERM" not in log, log[-4000:]  # its handler never ran


def test_the_page_has_every_recipe_it_names():
    assert set(recipes()) == {"plain-loop", "lightning"}
