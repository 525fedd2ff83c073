"""examples/pipelines/kfp run as a user runs them: the intro pipeline compiles to IR with
both components chained; the tx-steps pipeline runs under kfp.local, its apps on local_cwd."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tx.testing.backends import require_module

require_module("kfp", "the KFP v2 SDK; these tests run in hatch's kfp environment: hatch run kfp:test")

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "pipelines" / "kfp"

pytestmark = pytest.mark.timeout(240)


def _run(script: str, *args: str, env, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLES / script), *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=200)


def test_intro_pipeline_compiles(tmp_path, tx_env):
    out = _run("intro_pipeline.py", "--output", str(tmp_path / "p.yaml"), env=tx_env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    ir = yaml.safe_load((tmp_path / "p.yaml").read_text())
    executors = ir["deploymentSpec"]["executors"]
    assert executors["exec-python-python"]["container"]["command"][:2] == ["python", "-c"]
    assert executors["exec-python-python"]["container"]["resources"]["resourceMemoryLimit"] == "256Mi"
    assert ir["root"]["dag"]["tasks"]["echo-echo"]["dependentTasks"] == ["python-python"]


def test_tx_step_pipeline_runs(tmp_path, tx_env):
    """(its --fail variant is test_step.py's failing pipeline, as a script)"""
    ok = _run("tx_step_pipeline.py", env=tx_env, cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-3000:]
    assert "prepare/0 data ready" in ok.stdout
    assert "train/0 training on replica 0" in ok.stdout and "train/1 training on replica 1" in ok.stdout
