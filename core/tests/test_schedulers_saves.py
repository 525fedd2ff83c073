"""tx.schedulers.saves reads the completion markers tx.distributed.save_checkpoint writes."""
import json
from pathlib import Path

import tx.distributed
from tx.schedulers.saves import COMPLETE, local_path, newest_save, what_saved


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
