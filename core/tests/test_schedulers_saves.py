"""tx.schedulers.saves reads the completion markers tx.distributed.save_checkpoint writes."""
import json
from pathlib import Path

import tx.distributed
from tx.schedulers.saves import COMPLETE, local_path, newest_save, read_saved, what_saved, with_saves
from tx.specs import AppState, Attempt, FailureKind


def _save(root: Path, step: int, marker: object) -> None:
    d = root / f"step-{step:09d}"
    d.mkdir(parents=True)
    (d / COMPLETE).write_text(marker if isinstance(marker, str) else json.dumps(marker))


def test_the_marker_is_the_one_save_checkpoint_writes():
    assert COMPLETE == tx.distributed.CHECKPOINT_COMPLETE


def test_newest_complete_save_before_until(tmp_path):
    _save(tmp_path, 5, {"step": 5, "seconds": 0.5, "completed": 100.0})
    _save(tmp_path, 7, {"step": 7, "seconds": 2.25, "completed": 110.0})
    (tmp_path / f"step-{9:09d}").mkdir()  # torn: no marker, never counted
    _save(tmp_path, 8, {"step": 8, "seconds": 1.0, "completed": 130.0})  # a later attempt's
    assert newest_save(str(tmp_path), until=120.0) == (7, 2.25, 110.0)
    assert newest_save(f"file://{tmp_path}") == (8, 1.0, 130.0)
    assert what_saved(str(tmp_path), since=105.0, until=120.0) == "saved step 7 in 2.2 s"
    assert what_saved(str(tmp_path), since=111.0, until=120.0) == (
        "no checkpoint saved before the kill; resumed from step 7")


def test_nothing_saved_old_markers_and_remote_locations(tmp_path):
    assert what_saved(str(tmp_path), since=0.0) == "no checkpoint saved before the kill; starts fresh"
    _save(tmp_path, 3, "")  # a marker of an older tx: no JSON
    assert newest_save(str(tmp_path)) == (3, None, None)
    assert what_saved(str(tmp_path), since=0.0) == "no checkpoint saved before the kill; resumed from step 3"
    assert local_path("s3://bucket/run") is None and what_saved("s3://bucket/run", since=0.0) == ""
    assert local_path(None) is None and what_saved(None, since=0.0) == ""


def test_every_reason_what_saved_writes_reads_back_as_fields(tmp_path):
    """The fields of ``tx status --json`` are read from the words :func:`what_saved` wrote,
    whatever the backend put before or after them; other words are never taken for them."""
    _save(tmp_path, 7, {"step": 7, "seconds": 0.123, "completed": 110.0})
    _save(tmp_path / "slow", 12, {"step": 12, "seconds": 3.14, "completed": 110.0})
    cases = [(what_saved(str(tmp_path), since=105.0), (7, 0.12, 7, True)),
             (what_saved(str(tmp_path / "slow"), since=105.0), (12, 3.1, 12, True)),
             (what_saved(str(tmp_path), since=111.0), (None, None, 7, True)),
             (what_saved(str(tmp_path / "none"), since=0.0), (None, None, None, True))]
    for saved, want in cases:
        for reason in (saved, f"preempted by Slurm (job 12); {saved}", f"w/0: exit 50001; {saved}; infra_retries=0"):
            assert read_saved(reason) == want, reason
    for other in ("", "NODE_FAIL", "the user saved step 5 in 1 s of it", "a; saved step 5x", "resumed from step 3"):
        assert read_saved(other) == (None, None, None, False), other


def test_with_saves_sets_the_preempted_attempt_and_the_next_one():
    infra = FailureKind.INFRA
    got = with_saves([Attempt(0, AppState.FAILED, infra, "DisruptionTarget; saved step 31 in 0.2 s", True),
                      Attempt(1, AppState.FAILED, infra, "x; no checkpoint saved before the kill; resumed from step 31",
                              True),
                      Attempt(2, AppState.FAILED, FailureKind.USER, "saved step 40 in 1 s", True),  # the user's words
                      Attempt(3, AppState.SUCCEEDED)])
    assert [(a.saved_step, a.save_seconds, a.resumed_step) for a in got] == [
        (31, 0.2, None), (None, None, 31), (None, None, 31), (None, None, None)]
    assert got[0].to_json()["saved_step"] == 31 and got[0].reason == "DisruptionTarget; saved step 31 in 0.2 s"
