"""`tx tracker`: tables and JSON of what the file tracker recorded, and one-line errors."""
from __future__ import annotations

import json
import textwrap

import pytest

from tx.cli.main import main
from tx.plugins import pip_install
from tx.testing import isolated_registry
from tx.tracker.backend.fsspec import create

PREP, TRAIN, EVAL = "local_cwd://tx/prep-1", "local_cwd://tx/train-2", "local_cwd://tx/eval-3"


@pytest.fixture
def store(tmp_path, monkeypatch):
    for var in ("TX_TRACKERS", "TORCHX_TRACKERS", "TX_TRACKER_FILE_CONFIG", "TORCHX_TRACKER_FILE_CONFIG", "TXCONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    root = tmp_path / "runs"
    t = create(str(root))
    t.add_artifact(PREP, "dataset", "/data/shards", {"rows": 1000})
    t.add_metadata(TRAIN, lr=0.05, epochs=8, optimizer={"name": "sgd"})
    t.add_source(TRAIN, PREP, "dataset")
    t.add_artifact(TRAIN, "model", "/ckpt/m.pt", {"accuracy": 0.97})
    t.add_artifact(TRAIN, "log", "/logs/train.txt")
    t.add_source(EVAL, TRAIN, "model")
    (work / ".txconfig").write_text(textwrap.dedent(f"""
        [tx:tracker]
        file =
        [tracker:file]
        config = {root}
        """))
    with isolated_registry():
        yield root


def tx(capsys, *argv: str):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_list_jobs(store, capsys):
    rc, out, err = tx(capsys, "tracker", "list", "jobs")
    assert (rc, err) == (0, "")
    assert out.split() == ["RUN", "ID", "-" * len(TRAIN), EVAL, PREP, TRAIN]  # sorted
    assert json.loads(tx(capsys, "tracker", "list", "jobs", "--json")[1]) == [EVAL, PREP, TRAIN]
    rc, out, _ = tx(capsys, "tracker", "list", "jobs", "--parent-run-id", PREP, "--json")
    assert json.loads(out) == [TRAIN]


def test_list_metadata(store, capsys):
    rc, out, err = tx(capsys, "tracker", "list", "metadata", TRAIN)
    assert rc == 0
    assert [ln.split(None, 1) for ln in out.splitlines()[2:]] == [
        ["lr", "0.05"], ["epochs", "8"], ["optimizer", '{"name": "sgd"}']]
    assert json.loads(tx(capsys, "tracker", "list", "metadata", "--json", TRAIN)[1]) == {
        "lr": 0.05, "epochs": 8, "optimizer": {"name": "sgd"}}


def test_list_artifacts(store, capsys):
    rc, out, _ = tx(capsys, "tracker", "list", "artifacts", TRAIN)
    assert rc == 0
    rows = [ln.split(None, 2) for ln in out.splitlines()[2:]]
    assert rows == [["model", "/ckpt/m.pt", '{"accuracy": 0.97}'], ["log", "/logs/train.txt"]]
    rc, out, _ = tx(capsys, "tracker", "list", "artifacts", "--artifact", "model", "--json", TRAIN)
    assert json.loads(out) == {"model": {"name": "model", "path": "/ckpt/m.pt", "metadata": {"accuracy": 0.97}}}


def test_lineage(store, capsys):
    rc, out, _ = tx(capsys, "tracker", "lineage", TRAIN)
    assert rc == 0
    assert out.startswith(f"run: {TRAIN}\n\nartifacts:\n")
    parents = out.split("parents (runs it consumed):\n")[1].split("\n\n")[0].splitlines()
    assert parents[2].split() == [PREP, "dataset", "dataset=/data/shards"]
    children = out.split("children (runs that consumed it):\n")[1].splitlines()
    assert children[2].split() == [EVAL, "model"]
    rc, out, _ = tx(capsys, "tracker", "list", "lineage", "--json", EVAL)  # TorchX's spelling
    assert json.loads(out)["parents"][0]["artifacts"]["model"]["path"] == "/ckpt/m.pt"
    rc, out, _ = tx(capsys, "tracker", "lineage", PREP)
    assert "parents (runs it consumed):\n(none)\n" in out


@pytest.mark.parametrize("argv, message", [
    (["list", "metadata", "local_cwd://tx/nope"],
     "run 'local_cwd://tx/nope' is not known to tracker 'file' (see `tx tracker list jobs`)"),
    (["lineage", "nope"], "run 'nope' is not known to tracker 'file'"),
    (["list", "artifacts", "--artifact", "weights", TRAIN], "has no artifact 'weights' (it has: model, log)"),
    (["list", "jobs", "--tracker", "mlflow"], "tracker 'mlflow' is not installed: {pip_install}"),
    (["list", "jobs", "--tracker", "nosuch"], "unknown tracker 'nosuch' (installed: file)"),
])
def test_errors_are_one_line(store, capsys, argv, message):
    rc, out, err = tx(capsys, "tracker", *argv)
    # the install hint depends on the working directory (a checkout's path, relative when
    # under it): the one the CLI just printed with
    message = message.replace("{pip_install}", pip_install("tx-tracker-mlflow"))
    assert rc == 1 and out == ""
    assert len(err.splitlines()) == 1 and message in err, err


def test_no_tracker_configured_is_one_clear_line(store, capsys, monkeypatch):
    monkeypatch.setenv("TX_TRACKERS", "")
    rc, out, err = tx(capsys, "tracker", "list", "jobs")
    assert rc == 1 and out == ""
    assert err == ("tx tracker: error: no tracker is configured: add a [tx:tracker] section to .txconfig "
                   "(e.g. `file =`), or set TX_TRACKERS=file\n")


def test_environment_chooses_the_tracker(store, capsys, monkeypatch, tmp_path):
    (tmp_path / "work" / ".txconfig").unlink()
    monkeypatch.setenv("TX_TRACKERS", "file")
    monkeypatch.setenv("TX_TRACKER_FILE_CONFIG", str(store))
    assert json.loads(tx(capsys, "tracker", "list", "jobs", "--json")[1]) == [EVAL, PREP, TRAIN]
    monkeypatch.setenv("TX_TRACKER_FILE_CONFIG", str(tmp_path / "empty"))
    assert json.loads(tx(capsys, "tracker", "list", "jobs", "--json")[1]) == []


def test_usage_errors(store, capsys):
    with pytest.raises(SystemExit) as e:
        main(["tracker"])
    assert e.value.code == 2
    assert "tx tracker: error: the following arguments are required" in capsys.readouterr().err


def test_tracker_option_picks_one_not_in_the_config(store, capsys, monkeypatch, tmp_path):
    (tmp_path / "work" / ".txconfig").write_text("[tx:tracker]\nnosuch =\n")
    monkeypatch.setenv("TX_TRACKER_FILE_CONFIG", str(store))
    assert json.loads(tx(capsys, "tracker", "list", "jobs", "--json", "--tracker", "file")[1]) == [EVAL, PREP, TRAIN]
    monkeypatch.delenv("TX_TRACKER_FILE_CONFIG")
    (tmp_path / "work" / ".txconfig").write_text(f"[tracker:file]\nconfig = {store}\n")
    assert json.loads(tx(capsys, "tracker", "list", "jobs", "--json", "--tracker", "file")[1]) == [EVAL, PREP, TRAIN]
