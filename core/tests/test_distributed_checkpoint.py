"""Checkpoints in TX_CHECKPOINT_DIR: the Runner gives every role the run's location, and
tx.distributed saves (torch.distributed.checkpoint, then a completion marker), finds and
loads the newest complete one."""
from pathlib import Path
from typing import Any

import pytest

import tx.distributed as txd
from tx.config.recovery import checkpoint_url
from tx.testing.backends import require_module


@pytest.fixture
def torch() -> Any:
    return require_module("torch", "tx.distributed saves with torch.distributed.checkpoint: pip install torch==2.13.0")


def _model(torch: Any, seed: int) -> Any:
    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
    return model, opt


@pytest.mark.parametrize("url", [False, True])
def test_save_find_and_load_the_newest_complete_checkpoint(torch: Any, tmp_path: Path, url: bool,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    root = f"file://{tmp_path}/ck" if url else str(tmp_path / "ck")
    monkeypatch.setenv("TX_CHECKPOINT_DIR", root)
    assert txd.checkpoint_dir() == root and txd.latest_checkpoint() is None
    model, opt = _model(torch, 0)
    for step in (1, 2, 3):
        txd.save_checkpoint({"model": model.state_dict(), "optim": opt.state_dict(), "epoch": step}, step=step)
    (tmp_path / "ck" / "step-000000009").mkdir()  # a save cut short: no marker, ignored
    assert txd.latest_checkpoint() == (3, f"{root}/step-000000003")
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == [
        "step-000000002", "step-000000003", "step-000000009"]  # keep=2
    other, other_opt = _model(torch, 1)
    state = {"model": other.state_dict(), "optim": other_opt.state_dict(), "epoch": 0}
    assert txd.load_latest_checkpoint(state) == 3 and state["epoch"] == 3
    other.load_state_dict(state["model"])
    other_opt.load_state_dict(state["optim"])
    assert torch.equal(other.weight, model.weight)
    assert torch.equal(other_opt.state_dict()["state"][0]["momentum_buffer"],
                       opt.state_dict()["state"][0]["momentum_buffer"])


def test_without_a_location(torch: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TX_CHECKPOINT_DIR", raising=False)
    assert txd.checkpoint_dir() is None
    with pytest.raises(ValueError, match="TX_CHECKPOINT_DIR is unset"):
        txd.latest_checkpoint()
    with pytest.raises(ValueError, match="step must be >= 0"):
        txd.save_checkpoint({}, step=-1, root=str(tmp_path))
    assert txd.load_latest_checkpoint({}, root=str(tmp_path / "none")) is None


def test_the_run_location_is_per_scheduler_session_and_app_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    conf = tmp_path / ".txconfig"
    conf.write_text("[tx:checkpoint]\nslurm = s3://bucket/ckpt/\n")
    monkeypatch.setenv("TXCONFIG", str(conf))
    assert checkpoint_url("slurm", "tx", "a/b c") == "s3://bucket/ckpt/tx/a%2Fb%20c"
    assert checkpoint_url("local_cwd", "s", "train") == str(tmp_path / "state" / "checkpoints" / "s" / "train")
