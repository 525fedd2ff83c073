"""Jobs whose ranks all write to one MLflow run, launched as users launch them (`tx run` on
local_cwd, trackers from .txconfig), checked through MLflow's own client and `tx tracker`.
Also: many ranks starting at the same moment make one run, not several; rank 0 ends the run
with the job's outcome."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Dict, List

import pytest
from mlflow import MlflowClient

BIN = Path(sys.executable).parent

RECORD = textwrap.dedent("""
    import os
    from tx.tracker import app_run_from_env

    run = app_run_from_env()
    replica = int(os.environ["TX_REPLICA_ID"])
    run.add_metadata(**{f"replica{replica}": replica, "replicas": os.environ["TX_NUM_REPLICAS"]})
    if replica == 0:
        with open("model.txt", "w") as f:
            f.write("weights of " + run.id)
        run.add_artifact("model", os.path.abspath("model.txt"), {"accuracy": 0.9})
    print("recorded", run.id, flush=True)
""")


def tx_env(tmp_path: Path) -> Dict[str, str]:
    env = dict(os.environ)
    env.update(HOME=str(tmp_path / "home"), TX_STATE_DIR=str(tmp_path / "state"),
               PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    (tmp_path / "home").mkdir(exist_ok=True)
    return env


def tx(tmp_path: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "tx"), *args], cwd=tmp_path, env=tx_env(tmp_path), text=True,
                          capture_output=True, timeout=timeout)


def runs_named(client: MlflowClient, name: str) -> List:
    ids = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(ids, filter_string=f"attributes.run_name = '{name}'")


def test_two_replica_job_writes_one_run(mlflow_server, experiment, tmp_path):
    (tmp_path / "record.py").write_text(RECORD)
    (tmp_path / ".txconfig").write_text(textwrap.dedent(f"""
        [tx:tracker]
        mlflow =

        [tracker:mlflow]
        config = {mlflow_server.uri};experiment_name={experiment}
        """))
    p = tx(tmp_path, "run", "-s", "local_cwd", "--parent_run_id", "local_cwd://tx/prep-0",
           "utils.python", "--num_replicas", "2", "--script", "record.py")
    assert p.returncode == 0, p.stderr[-3000:]
    handle = p.stdout.splitlines()[0]
    assert handle.startswith("local_cwd://tx/")
    assert f"python/0 recorded {handle}" in p.stdout and f"python/1 recorded {handle}" in p.stdout

    client = MlflowClient(mlflow_server.uri)
    (run,) = runs_named(client, handle)  # rank 0 created it, rank 1 joined: one run
    assert client.get_experiment(run.info.experiment_id).name == experiment
    assert run.data.params == {"replica0": "0", "replica1": "1", "replicas": "2"}
    assert run.info.status == "FINISHED"  # ended by rank 0 when it exited
    assert json.loads(run.data.tags["tx.artifact/model/metadata/accuracy"]) == 0.9
    got = client.download_artifacts(run.info.run_id, "model/model.txt", str(tmp_path / "dl"))
    assert Path(got).read_text() == f"weights of {handle}"
    assert [json.loads(v)["source_run_id"] for k, v in run.data.tags.items() if k.startswith("tx.source/")] == [
        "local_cwd://tx/prep-0"]

    # and `tx tracker` shows the same
    p = tx(tmp_path, "tracker", "list", "metadata", "--json", handle)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {"replica0": "0", "replica1": "1", "replicas": "2"}
    p = tx(tmp_path, "tracker", "list", "artifacts", handle)
    assert p.returncode == 0 and "model" in p.stdout and '{"accuracy": 0.9}' in p.stdout, p.stderr
    p = tx(tmp_path, "tracker", "list", "jobs", "--parent-run-id", "local_cwd://tx/prep-0", "--json")
    assert json.loads(p.stdout) == [handle]


RANK = textwrap.dedent("""
    import os, sys, time
    go = sys.argv[1]
    from tx.tracker import app_run_from_env
    import mlflow  # imported before the start line, as a training script would have
    open(go + "-ready-" + os.environ["RANK"], "w").close()
    while not os.path.exists(go):
        time.sleep(0.002)
    run = app_run_from_env()     # rank 0 creates the run here, the others join it
    rank = int(os.environ["RANK"])
    run.add_metadata(**{f"rank{rank}": rank})
    if rank == 0 and os.environ.get("FAIL_RANK0"):
        raise RuntimeError("rank 0 fails")
""")


def start_ranks(uri: str, experiment: str, job: str, n: int, tmp_path: Path, **extra: str) -> List[subprocess.Popen]:
    go = tmp_path / f"go-{uuid.uuid4().hex[:6]}"
    procs = []
    for rank in range(n):
        env = dict(os.environ, TX_JOB_ID=job, TX_TRACKERS="mlflow", RANK=str(rank), WORLD_SIZE=str(n),
                   TX_TRACKER_MLFLOW_CONFIG=f"{uri};experiment_name={experiment}", **extra)
        procs.append(subprocess.Popen([sys.executable, "-c", RANK, str(go)], env=env, cwd=tmp_path,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    deadline = time.monotonic() + 120
    while not all(Path(f"{go}-ready-{r}").exists() for r in range(n)):  # all wait at the start line
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "ranks did not start"
        time.sleep(0.05)
    go.touch()
    return procs


def test_eight_ranks_starting_at_the_same_moment_make_one_run(mlflow_server, experiment, tmp_path):
    job = f"local_cwd://tx/ddp-{uuid.uuid4().hex[:8]}"
    procs = start_ranks(mlflow_server.uri, experiment, job, 8, tmp_path)
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, "\n".join(outs)[-4000:]
    client = MlflowClient(mlflow_server.uri)
    (run,) = runs_named(client, job)
    assert run.data.params == {f"rank{r}": str(r) for r in range(8)}
    assert run.data.tags["tx.run_id"] == job


def test_rank0_failing_marks_the_run_failed(mlflow_server, experiment, tmp_path):
    job = f"local_cwd://tx/ddp-{uuid.uuid4().hex[:8]}"
    procs = start_ranks(mlflow_server.uri, experiment, job, 2, tmp_path, FAIL_RANK0="1")
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [1, 0], outs
    assert "RuntimeError: rank 0 fails" in outs[0]
    (run,) = runs_named(MlflowClient(mlflow_server.uri), job)
    assert run.info.status == "FAILED"
    assert run.data.params == {"rank0": "0", "rank1": "1"}


@pytest.mark.parametrize("config", ["http://127.0.0.1:{port}", "http://127.0.0.1:{port};experiment_name=x"])
def test_unreachable_server_is_one_line_in_the_cli(config, tmp_path):
    from tx.testing.backends import free_port

    env = tx_env(tmp_path)
    env.update(TX_TRACKERS="mlflow", TX_TRACKER_MLFLOW_CONFIG=config.format(port=free_port()))
    p = subprocess.run([str(BIN / "tx"), "tracker", "list", "jobs"], cwd=tmp_path, env=env, text=True,
                       capture_output=True, timeout=120)
    assert p.returncode == 1 and p.stdout == ""
    assert len(p.stderr.splitlines()) == 1, p.stderr
    assert p.stderr.startswith("tx tracker: error: the MLflow tracking server http://127.0.0.1:")
    assert "is not reachable (ConnectionError): start it, or fix the tracking URI" in p.stderr
