"""The README's example, as written: its .txconfig, record.py and commands, run against the
session's mlflow server (a DDP job of two ranks through torchrun)."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
from mlflow import MlflowClient

from tx.tracker.backend.fsspec import create
from tx.testing.backends import require_module

README = Path(__file__).resolve().parent.parent / "README.md"
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.slow


def blocks(lang: str) -> List[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(), re.S)


def test_the_readme_example(mlflow_server, experiment, tmp_path):
    require_module("torch", "dist.ddp runs torchrun: pip install torch==2.13.0")
    (ini,) = blocks("ini")
    (py,) = blocks("python")
    commands = [ln.split("  #")[0].strip() for ln in blocks("sh")[1].splitlines() if ln.strip()]
    assert ini.startswith("# .txconfig\n") and py.startswith("# record.py\n")
    (tmp_path / ".txconfig").write_text(
        ini.replace("http://127.0.0.1:5000", mlflow_server.uri).replace("experiment_name=digits",
                                                                        f"experiment_name={experiment}"))
    (tmp_path / "record.py").write_text(py)
    # the parent run (--parent_run_id) is recorded as a source when the job makes its run
    (tmp_path / "eval.py").write_text("from tx.tracker import app_run_from_env\napp_run_from_env()\n")
    home = tmp_path / "home"
    home.mkdir()
    env: Dict[str, str] = dict(os.environ, HOME=str(home), TX_STATE_DIR=str(tmp_path / "state"),
                               PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")

    out: List[subprocess.CompletedProcess] = []
    handle = ""
    for cmd in commands:
        argv = shlex.split(cmd.replace("local_cwd://tx/record-...", handle))
        p = subprocess.run(argv, cwd=tmp_path, env=env, text=True, capture_output=True, timeout=300)
        assert p.returncode == 0, (cmd, p.stderr[-3000:])
        out.append(p)
        if not handle:
            handle = p.stdout.splitlines()[0]
            assert handle.startswith("local_cwd://tx/record-"), p.stdout
    jobs, metadata, artifacts, child_run, lineage = out[1:]
    child = child_run.stdout.splitlines()[0]  # the handle; the job's output follows it
    assert handle in jobs.stdout.split()
    assert [ln.split(None, 1) for ln in metadata.stdout.splitlines()[2:]] == [
        ["lr", "0.05"], ["epochs", "8"], ["optimizer.name", "sgd"]]
    assert "model" in artifacts.stdout and '{"accuracy": 0.97}' in artifacts.stdout
    assert child in lineage.stdout.split("children (runs that consumed it):")[1]

    # MLflow's own view: one run for the two ranks, with the upload
    client = MlflowClient(mlflow_server.uri)
    exp = client.get_experiment_by_name(experiment)
    (run,) = client.search_runs([exp.experiment_id], filter_string=f"attributes.run_name = '{handle}'")
    assert run.data.params == {"lr": "0.05", "epochs": "8", "optimizer.name": "sgd"}
    assert Path(client.download_artifacts(run.info.run_id, "model/model.txt", str(tmp_path / "dl"))).read_text() \
        == "weights"
    # and the file tracker beside it, under ~/tx-runs
    files = create(str(home / "tx-runs"))
    assert files.metadata(handle) == {"lr": 0.05, "epochs": 8, "optimizer": {"name": "sgd"}}
    assert files.artifacts(handle)["model"].path == str(tmp_path / "model.txt")
    assert [r.run_id for r in files.lineage(handle).children] == [child]
    p = subprocess.run([str(BIN / "tx"), "tracker", "lineage", "--json", handle], cwd=tmp_path, env=env,
                       text=True, capture_output=True, timeout=120)
    assert json.loads(p.stdout)["children"] == [{"run_id": child, "artifact_name": None, "artifacts": {}}]
