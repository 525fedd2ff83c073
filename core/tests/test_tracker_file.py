"""The file tracker (tx.tracker.backend.fsspec): records, merging, lineage, run id encoding,
locations, and many processes writing one run at the same moment."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tx.tracker import Lineage, LineageRun, TrackerArtifact, TrackerSource
from tx.tracker.backend.fsspec import FsspecTracker, create, decode_run_id, default_root, encode_run_id

RUN = "local_cwd://tx/train-x1y2"


@pytest.fixture(params=["local", "memory"])
def tracker(request, tmp_path) -> FsspecTracker:
    if request.param == "local":
        return create(str(tmp_path / "runs"))
    return create(f"memory://tx-test-{uuid.uuid4().hex}")


@pytest.mark.parametrize("run_id", [
    RUN, "kubernetes://tx/ns:job-1", "plain", "a b/c", "+%2B~", ".", "..", ".hidden", "ünï/cødé", "x" * 200,
])
def test_run_ids_encode_to_one_safe_path_segment_and_back(run_id):
    key = encode_run_id(run_id)
    assert "/" not in key and "%" not in key and not key.startswith(".")
    assert decode_run_id(key) == run_id


@pytest.mark.parametrize("bad", ["", None, 3])
def test_bad_run_ids_are_refused(bad, tracker):
    with pytest.raises(ValueError, match="run id must be a non-empty string"):
        tracker.add_metadata(bad, a=1)


def test_metadata_merges_in_order_and_later_values_win(tracker):
    tracker.add_metadata(RUN, lr=0.1, epochs=8, cfg={"opt": "sgd", "layers": [64, 10]})
    tracker.add_metadata(RUN, lr=0.05, note="second")
    tracker.add_metadata(RUN)  # nothing to record
    assert tracker.metadata(RUN) == {
        "lr": 0.05, "epochs": 8, "cfg": {"opt": "sgd", "layers": [64, 10]}, "note": "second"}


def test_values_json_cannot_hold_are_stored_as_text(tracker):
    tracker.add_metadata(RUN, path=Path("/data/x"), when={1, 2} and "set")
    assert tracker.metadata(RUN) == {"path": "/data/x", "when": "set"}


def test_artifacts_by_name_later_one_replaces(tracker):
    tracker.add_artifact(RUN, "model", "/ckpt/1.pt", {"accuracy": 0.9})
    tracker.add_artifact(RUN, "log", "s3://bucket/log.txt")
    tracker.add_artifact(RUN, "model", "/ckpt/2.pt", {"accuracy": 0.95, "epoch": 2})
    assert tracker.artifacts(RUN) == {
        "model": TrackerArtifact("model", "/ckpt/2.pt", {"accuracy": 0.95, "epoch": 2}),
        "log": TrackerArtifact("log", "s3://bucket/log.txt", None),
    }
    with pytest.raises(ValueError, match="artifact name"):
        tracker.add_artifact(RUN, "", "/x")


def test_unknown_runs_have_nothing(tracker):
    assert tracker.metadata("nope") == {} and tracker.artifacts("nope") == {}
    assert list(tracker.sources("nope")) == [] and list(tracker.run_ids()) == []
    assert list(tracker.run_ids(parent_run_id="nope")) == []


def test_sources_deduplicated_and_filtered_by_artifact(tracker):
    tracker.add_source(RUN, "data-run", "dataset")
    tracker.add_source(RUN, "pretrain-run")
    tracker.add_source(RUN, "data-run", "dataset")  # every rank may record it
    assert list(tracker.sources(RUN)) == [TrackerSource("data-run", "dataset"), TrackerSource("pretrain-run", None)]
    assert list(tracker.sources(RUN, artifact_name="dataset")) == [TrackerSource("data-run", "dataset")]


def test_run_ids_and_children(tracker):
    tracker.add_metadata("b", x=1)
    tracker.add_metadata("a", x=1)
    tracker.add_source("c", "a", "model")
    tracker.add_source("d", "a")
    tracker.add_source("d", "a")
    assert list(tracker.run_ids()) == ["a", "b", "c", "d"]
    assert list(tracker.run_ids(parent_run_id="a")) == ["c", "d"]
    assert list(tracker.run_ids(parent_run_id="b")) == []
    with pytest.raises(ValueError, match="parent_run_id"):
        tracker.run_ids(experiment="x")


def test_lineage_has_parents_and_children_with_their_artifacts(tracker):
    tracker.add_artifact("prep", "dataset", "/data/shards", {"rows": 1000})
    tracker.add_source("train", "prep", "dataset")
    tracker.add_artifact("train", "model", "/ckpt/m.pt", {"accuracy": 0.97})
    tracker.add_source("eval", "train", "model")
    tracker.add_source("export", "train")
    tracker.add_artifact("export", "onnx", "/export/m.onnx")
    model = TrackerArtifact("model", "/ckpt/m.pt", {"accuracy": 0.97})
    assert tracker.lineage("train") == Lineage(
        run_id="train",
        artifacts={"model": model},
        parents=[LineageRun("prep", "dataset", {"dataset": TrackerArtifact("dataset", "/data/shards", {"rows": 1000})})],
        children=[LineageRun("eval", "model", {}),
                  LineageRun("export", None, {"onnx": TrackerArtifact("onnx", "/export/m.onnx", None)})],
    )
    d = tracker.lineage("eval").to_dict()
    assert json.loads(json.dumps(d)) == {
        "run_id": "eval", "artifacts": {}, "children": [],
        "parents": [{"run_id": "train", "artifact_name": "model",
                     "artifacts": {"model": {"name": "model", "path": "/ckpt/m.pt", "metadata": {"accuracy": 0.97}}}}],
    }


def test_records_are_files_and_nothing_temporary_is_left(tmp_path):
    t = create(str(tmp_path))
    t.add_metadata(RUN, a=1)
    t.add_source(RUN, "parent")
    run_dir = tmp_path / "runs" / encode_run_id(RUN)
    files = sorted(p.name for p in run_dir.iterdir())
    assert len(files) == 2 and all(f.endswith(".json") and not f.startswith(".") for f in files)
    assert json.loads((run_dir / files[0]).read_text()) == {"kind": "metadata", "run_id": RUN, "values": {"a": 1}}
    assert [p.name for p in (tmp_path / "children").iterdir()] == [encode_run_id("parent")]


def test_hidden_and_foreign_files_are_ignored(tmp_path):
    t = create(str(tmp_path))
    t.add_metadata(RUN, a=1)
    run_dir = tmp_path / "runs" / encode_run_id(RUN)
    (run_dir / ".tmp-abc").write_text('{"kind": "metadata", "values": {"a": 2}}')  # a write in flight
    (run_dir / "notes.txt").write_text("hello")
    (run_dir / "zz-broken.json").write_text('{"kind": "meta')
    assert t.metadata(RUN) == {"a": 1}


def test_locations(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_root() == str(tmp_path / "xdg" / "tx" / "tracker")
    assert create(None).root_dir == str(tmp_path / "xdg" / "tx" / "tracker")
    assert create("").root_dir == str(tmp_path / "xdg" / "tx" / "tracker")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert create("~/runs").root_dir == str(tmp_path / "home" / "runs")
    monkeypatch.chdir(tmp_path)
    assert create("rel/dir").root_dir == str(tmp_path / "rel" / "dir")
    assert create(f"file://{tmp_path}/u").root_dir == f"{tmp_path}/u"
    assert repr(create(f"file://{tmp_path}/u")) == f"FsspecTracker('file://{tmp_path}/u')"


def test_unknown_protocol_is_one_clear_error():
    with pytest.raises(ValueError, match=r"file tracker location 'nosuchproto://x': .*nosuchproto"):
        create("nosuchproto://x")


WRITER = textwrap.dedent("""
    import os, sys, time
    from tx.tracker.backend.fsspec import create
    root, run, idx, n, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    t = create(root)
    while not os.path.exists(go):   # start together
        time.sleep(0.001)
    for i in range(n):
        t.add_metadata(run, **{f"w{idx}_{i}": {"writer": idx, "i": i, "pad": "x" * 2000}})
        t.add_artifact(run, f"ckpt-{idx}", f"/ckpt/{idx}/{i}.pt", {"i": i})
        t.add_artifact(run, "shared", f"/shared/{idx}/{i}", {"writer": idx})
    t.add_source(run, "parent-run", "data")
""")


def test_eight_processes_writing_one_run_lose_and_tear_nothing(tmp_path):
    root, n, writers = tmp_path / "store", 40, 8
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(root), RUN, str(k), str(n), str(go)])
             for k in range(writers)]
    time.sleep(1.0)  # every writer imported and waits
    go.touch()
    reader = create(str(root))
    run_dir = root / "runs" / encode_run_id(RUN)
    seen = 0
    while any(p.poll() is None for p in procs):
        # a reader during the writes sees only whole records
        for f in (run_dir.iterdir() if run_dir.exists() else []):
            if f.name.endswith(".json") and not f.name.startswith("."):
                try:
                    json.loads(f.read_text())
                except FileNotFoundError:
                    continue
                seen += 1
        assert len(reader.metadata(RUN)) <= writers * n
    assert [p.wait() for p in procs] == [0] * writers
    assert seen > 0
    md = reader.metadata(RUN)
    assert len(md) == writers * n
    assert all(md[f"w{k}_{i}"] == {"writer": k, "i": i, "pad": "x" * 2000} for k in range(writers) for i in range(n))
    arts = reader.artifacts(RUN)
    assert {f"ckpt-{k}": arts[f"ckpt-{k}"].path for k in range(writers)} == {
        f"ckpt-{k}": f"/ckpt/{k}/{n - 1}.pt" for k in range(writers)}
    assert arts["shared"].path.endswith(f"/{n - 1}")
    assert list(reader.sources(RUN)) == [TrackerSource("parent-run", "data")]
    assert list(reader.run_ids(parent_run_id="parent-run")) == [RUN]
    files = os.listdir(run_dir)
    assert len(files) == writers * (3 * n + 1) and not [f for f in files if f.startswith(".")]
