"""MLflowTracker against a real MLflow: the session's `mlflow server` and a sqlite store,
each record checked through MLflow's own client."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from mlflow import MlflowClient

from tx.testing.backends import free_port
from tx.tracker import Lineage, LineageRun, TrackerArtifact, TrackerSource
from tx_tracker_mlflow.tracker import (
    DuplicateRunError,
    MLflowTracker,
    RunNotCreatedError,
    TrackingServerUnreachable,
    create,
    parse_config,
)


def new_run_id(name: str = "train") -> str:
    return f"local_cwd://tx/{name}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def tracker(store_uri: str, experiment: str) -> MLflowTracker:
    return MLflowTracker(experiment_name=experiment, tracking_uri=store_uri)


def only_run(client: MlflowClient, experiment: str):
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1, [r.info.run_name for r in runs]
    return runs[0]


def test_metadata_are_params_of_one_run_named_by_the_run_id(tracker, store_uri, experiment):
    run_id = new_run_id()
    tracker.add_metadata(run_id, lr=0.05, epochs=8, optimizer={"name": "sgd", "momentum": 0.9})
    tracker.add_metadata(run_id, lr=0.05)  # the same value again (every rank may log it)
    tracker.add_metadata(run_id)
    expected = {"lr": "0.05", "epochs": "8", "optimizer.name": "sgd", "optimizer.momentum": "0.9"}
    assert tracker.metadata(run_id) == expected
    run = only_run(MlflowClient(store_uri), experiment)
    assert run.info.run_name == run_id and run.data.tags["tx.run_id"] == run_id
    assert run.data.params == expected
    # another tracker object (another process, `tx tracker`) finds it by name
    assert MLflowTracker(tracking_uri=store_uri).metadata(run_id) == expected


def test_ranks_logging_the_same_params_at_once_all_succeed(store_uri, experiment):
    """Every rank of a DDP job logs the same params into the one run at the same moment (the
    README's record.py): two inserts of one param race in the store, and neither rank fails."""
    import threading

    for _ in range(8):
        run_id = new_run_id()
        MLflowTracker(experiment_name=experiment, tracking_uri=store_uri).add_metadata(run_id, seed=1)
        ranks = [MLflowTracker(experiment_name=experiment, tracking_uri=store_uri) for _ in range(4)]
        start, errors = threading.Barrier(len(ranks)), []

        def log(t: MLflowTracker) -> None:
            start.wait()
            try:
                t.add_metadata(run_id, lr=0.05, epochs=8, optimizer={"name": "sgd"})
            except Exception as e:  # noqa: BLE001 - collected, asserted below
                errors.append(e)

        threads = [threading.Thread(target=log, args=(t,)) for t in ranks]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        assert errors == []
        assert ranks[0].metadata(run_id) == {"seed": "1", "lr": "0.05", "epochs": "8", "optimizer.name": "sgd"}


def test_a_changed_param_is_a_clear_error(tracker):
    run_id = new_run_id()
    tracker.add_metadata(run_id, lr=0.1)
    with pytest.raises(ValueError, match="^MLflow refused: Changing param values is not allowed.*'lr'"):
        tracker.add_metadata(run_id, lr=0.2)


def test_local_artifacts_are_uploaded_and_urls_recorded(tracker, store_uri, experiment, tmp_path):
    run_id = new_run_id()
    ckpt = tmp_path / "m.pt"
    ckpt.write_bytes(b"weights" * 100)
    shards = tmp_path / "shards"
    shards.mkdir()
    for i in range(3):
        (shards / f"part-{i}").write_text(f"shard {i}\n")
    tracker.add_artifact(run_id, "model", str(ckpt), {"accuracy": 0.97, "epoch": 8, "tags": ["best"]})
    tracker.add_artifact(run_id, "data", f"file://{shards}")
    tracker.add_artifact(run_id, "remote", "s3://bucket/exported/model.onnx", {"format": "onnx"})
    arts = tracker.artifacts(run_id)
    assert set(arts) == {"model", "data", "remote"}
    assert arts["model"].metadata == {"accuracy": 0.97, "epoch": 8, "tags": ["best"]}
    assert arts["remote"] == TrackerArtifact("remote", "s3://bucket/exported/model.onnx", {"format": "onnx"})
    assert arts["data"].metadata is None
    client = MlflowClient(store_uri)
    run = only_run(client, experiment)
    assert arts["model"].path == f"{run.info.artifact_uri}/model/m.pt"
    assert arts["data"].path == f"{run.info.artifact_uri}/data"
    # the uploads, read back through MLflow
    got = Path(client.download_artifacts(run.info.run_id, "model/m.pt", str(tmp_path / "dl")))
    assert got.read_bytes() == ckpt.read_bytes()
    assert sorted(a.path for a in client.list_artifacts(run.info.run_id, "data")) == [
        "data/part-0", "data/part-1", "data/part-2"]
    assert run.data.tags["tx.artifact/model/metadata/accuracy"] == "0.97"
    # recorded again: the new metadata replaces the old, keys included
    tracker.add_artifact(run_id, "model", str(ckpt), {"accuracy": 0.98})
    assert tracker.artifacts(run_id)["model"].metadata == {"accuracy": 0.98}


@pytest.mark.parametrize("name", ["", "a/b", "..", "bad*name"])
def test_bad_artifact_names_are_refused(tracker, name):
    with pytest.raises(ValueError):
        tracker.add_artifact(new_run_id(), name, "s3://b/x")


def test_sources_children_and_lineage(tracker, store_uri):
    prep, train, evaluate, export = new_run_id("prep"), new_run_id("train"), new_run_id("eval"), new_run_id("export")
    tracker.add_artifact(prep, "dataset", "s3://b/data", {"rows": 1000})
    tracker.add_source(train, prep, "dataset")
    tracker.add_source(train, prep, "dataset")  # idempotent
    tracker.add_artifact(train, "model", "s3://b/model.pt")
    tracker.add_source(evaluate, train, "model")
    tracker.add_source(export, train)
    assert list(tracker.sources(train)) == [TrackerSource(prep, "dataset")]
    assert list(tracker.sources(evaluate, artifact_name="other")) == []
    assert list(tracker.run_ids(parent_run_id=train)) == sorted([evaluate, export])
    assert {prep, train, evaluate, export} <= set(tracker.run_ids())
    assert tracker.lineage(train) == Lineage(
        train, {"model": TrackerArtifact("model", "s3://b/model.pt", None)},
        parents=[LineageRun(prep, "dataset", {"dataset": TrackerArtifact("dataset", "s3://b/data", {"rows": 1000})})],
        children=sorted([LineageRun(evaluate, "model", {}), LineageRun(export, None, {})], key=lambda r: r.run_id),
    )
    # MLflow's own parent link: the UI nests the run under its source
    client = MlflowClient(store_uri)
    train_run = tracker.find_run(train)
    assert client.get_run(tracker.find_run(evaluate).info.run_id).data.tags["mlflow.parentRunId"] == \
        train_run.info.run_id
    with pytest.raises(ValueError, match="parent_run_id"):
        tracker.run_ids(status="x")


def test_unknown_runs_have_nothing(tracker):
    run_id = new_run_id()
    assert tracker.metadata(run_id) == {} and tracker.artifacts(run_id) == {}
    assert list(tracker.sources(run_id)) == [] and list(tracker.run_ids(parent_run_id=run_id)) == []
    assert tracker.find_run(run_id) is None


def test_duplicate_run_names_are_a_clear_error(tracker, store_uri, experiment):
    run_id = new_run_id()
    client = MlflowClient(store_uri)
    exp_id = client.create_experiment(experiment)
    ids = {client.create_run(exp_id, run_name=run_id).info.run_id for _ in range(2)}
    with pytest.raises(DuplicateRunError, match=f"2 MLflow runs are named '{run_id}'") as e:
        tracker.metadata(run_id)
    assert all(i in str(e.value) for i in ids) and "mlflow runs delete" in str(e.value)


def test_a_deleted_experiment_is_a_clear_error(tracker, store_uri, experiment):
    client = MlflowClient(store_uri)
    client.delete_experiment(client.create_experiment(experiment))
    with pytest.raises(ValueError, match=f"experiment '{experiment}' is deleted: restore it"):
        tracker.add_metadata(new_run_id(), a=1)


def test_experiment_name_from_the_job_environment(store_uri, experiment, monkeypatch):
    monkeypatch.setenv("TX_TRACKING_EXPERIMENT_NAME", experiment)  # dist.ddp --name EXP/RUN
    t = MLflowTracker(tracking_uri=store_uri)
    assert t.experiment_name == experiment
    t.add_metadata(new_run_id(), a=1)
    assert only_run(MlflowClient(store_uri), experiment).data.params == {"a": "1"}


def test_create_primes_the_jobs_run_on_rank0_and_other_ranks_wait(store_uri, experiment, monkeypatch):
    job = new_run_id()
    monkeypatch.setenv("TX_JOB_ID", job)
    monkeypatch.setenv("RANK", "1")
    other = create(f"{store_uri};experiment_name={experiment};join_timeout=0.6")
    assert other.find_run(job) is None  # rank 1 creates nothing
    with pytest.raises(RunNotCreatedError, match=f"MLflow run '{job}' did not appear within 0.6 s"):
        other.add_metadata(job, rank1=1)
    monkeypatch.setenv("RANK", "0")
    rank0 = create(f"{store_uri};experiment_name={experiment}")
    assert rank0.find_run(job) is not None  # made when the tracker is made
    other.add_metadata(job, rank1=1)
    assert only_run(MlflowClient(store_uri), experiment).data.params == {"rank1": "1"}


def test_unreachable_server_is_one_clear_error():
    port = free_port()
    with pytest.raises(TrackingServerUnreachable, match=f"server http://127.0.0.1:{port} is not reachable"):
        create(f"http://127.0.0.1:{port}")


@pytest.mark.parametrize("config, kwargs", [
    (None, {}),
    ("", {}),
    ("http://h:5000", {"tracking_uri": "http://h:5000"}),
    ("sqlite:///m.db;experiment_name=e;join_timeout=30", {"tracking_uri": "sqlite:///m.db", "experiment_name": "e",
                                                           "join_timeout": 30.0}),
    ("experiment_name=e", {"experiment_name": "e"}),
    ("http://h/?a=b ; artifact_location = s3://b/a", {"tracking_uri": "http://h/?a=b", "artifact_location": "s3://b/a"}),
])
def test_parse_config(config, kwargs):
    assert parse_config(config) == kwargs


@pytest.mark.parametrize("config, message", [
    ("http://h;colour=blue", "unknown option 'colour=blue'"),
    ("http://h;join_timeout=soon", "join_timeout='soon' is not a number"),
])
def test_bad_config(config, message):
    with pytest.raises(ValueError, match=message):
        parse_config(config)
