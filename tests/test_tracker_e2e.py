"""Experiment tracking end to end: a real two-process DDP job launched with `tx run` records
metadata and an artifact from rank 0 into the file tracker and into MLflow (an `mlflow
server` this module starts), a second job consumes it (`--parent_run_id`), and `tx tracker`
shows both runs, their records and their lineage from either tracker."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict

import pytest

from tx.testing.backends import backend_unavailable, require_module

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent

TRAIN = textwrap.dedent("""
    import os
    import torch
    import torch.distributed as dist
    from tx.tracker import app_run_from_env

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    run = app_run_from_env()                  # every rank: the job's one run
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    if rank == 0:
        path = os.path.abspath(f"model-{os.environ['TX_APP_ID']}.pt")
        torch.save({"sum": total.item()}, path)
        run.add_metadata(world_size=world, allreduce_sum=total.item())
        run.add_artifact("model", path, {"sum": total.item()})
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank} done", flush=True)
""")

CONSUME = textwrap.dedent("""
    import os
    from tx.tracker import app_run_from_env

    run = app_run_from_env()                  # records --parent_run_id as a source
    run.add_source(os.environ["TX_PARENT_RUN_ID"], "model")
    run.add_metadata(evaluated="model")
""")


@pytest.fixture
def mlflow_uri(request: pytest.FixtureRequest) -> str:
    """The URI of the session's private ``mlflow server`` (tx-tracker-mlflow's ``mlflow_server``)."""
    try:
        return str(request.getfixturevalue("mlflow_server").uri)
    except pytest.FixtureLookupError:
        backend_unavailable("mlflow", "tx-tracker-mlflow is not installed: pip install -e 'plugins/tracker-mlflow[test]'")


@pytest.mark.backend("mlflow")
def test_ddp_job_recorded_in_file_tracker_and_mlflow_with_lineage(mlflow_uri, tmp_path):
    require_module("torch", "dist.ddp runs torchrun: pip install torch==2.13.0")
    runs = tmp_path / "runs"
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "consume.py").write_text(CONSUME)
    (tmp_path / ".txconfig").write_text(textwrap.dedent(f"""
        [tx:tracker]
        file =
        mlflow =

        [tracker:file]
        config = {runs}

        [tracker:mlflow]
        config = {mlflow_uri};experiment_name=e2e

        [local_cwd]
        log_dir = {tmp_path / "logs"}
        """))
    env: Dict[str, str] = dict(os.environ, HOME=str(tmp_path / "home"), TX_STATE_DIR=str(tmp_path / "state"),
                               PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    for var in ("TX_TRACKERS", "TORCHX_TRACKERS", "TX_PARENT_RUN_ID", "TORCHX_PARENT_RUN_ID", "MLFLOW_TRACKING_URI",
                "TXCONFIG"):
        env.pop(var, None)
    (tmp_path / "home").mkdir()

    def tx(*args: str) -> subprocess.CompletedProcess:
        p = subprocess.run([str(BIN / "tx"), *args], cwd=tmp_path, env=env, text=True, capture_output=True,
                           timeout=300)
        assert p.returncode == 0, (args, p.stderr[-3000:])
        return p

    train = tx("run", "-s", "local_cwd", "dist.ddp", "-j", "1x2", "--script", "train.py")
    h1 = train.stdout.splitlines()[0]
    assert "rank 0 done" in train.stdout and "rank 1 done" in train.stdout
    h2 = tx("run", "-s", "local_cwd", "--parent_run_id", h1, "utils.python", "--script", "consume.py").stdout.splitlines()[0]
    model = tmp_path / f"model-{h1.rsplit('/', 1)[1]}.pt"
    assert model.is_file()

    for tracker in ("file", "mlflow"):
        jobs = json.loads(tx("tracker", "list", "jobs", "--json", "--tracker", tracker).stdout)
        assert {h1, h2} <= set(jobs)
        md = json.loads(tx("tracker", "list", "metadata", "--json", "--tracker", tracker, h1).stdout)
        assert {k: float(v) for k, v in md.items()} == {"world_size": 2.0, "allreduce_sum": 3.0}
        arts = json.loads(tx("tracker", "list", "artifacts", "--json", "--tracker", tracker, h1).stdout)
        assert arts["model"]["metadata"] == {"sum": 3.0}
        children = json.loads(tx("tracker", "list", "jobs", "--json", "--tracker", tracker,
                                 "--parent-run-id", h1).stdout)
        assert children == [h2]
        lineage = json.loads(tx("tracker", "lineage", "--json", "--tracker", tracker, h2).stdout)
        assert {(p["run_id"], p["artifact_name"]) for p in lineage["parents"]} == {(h1, None), (h1, "model")}
        assert all(p["artifacts"]["model"]["metadata"] == {"sum": 3.0} for p in lineage["parents"])
        table = tx("tracker", "lineage", "--tracker", tracker, h1).stdout
        children_part = table.split("children (runs that consumed it):")[1]
        assert h2 in children_part and "model" in children_part

    # the file tracker keeps the local path; MLflow has its own copy of the checkpoint
    file_arts = json.loads(tx("tracker", "list", "artifacts", "--json", h1).stdout)  # first tracker: file
    assert file_arts["model"]["path"] == str(model)
    from mlflow import MlflowClient

    client = MlflowClient(mlflow_uri)
    exp = client.get_experiment_by_name("e2e")
    (run,) = client.search_runs([exp.experiment_id], filter_string=f"attributes.run_name = '{h1}'")
    got = client.download_artifacts(run.info.run_id, f"model/{model.name}", str(tmp_path / "dl"))
    assert Path(got).read_bytes() == model.read_bytes()
    (child,) = client.search_runs([exp.experiment_id], filter_string=f"attributes.run_name = '{h2}'")
    assert child.data.tags["mlflow.parentRunId"] == run.info.run_id
