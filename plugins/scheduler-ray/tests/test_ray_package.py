"""The job's working_dir, when a file in it changes while the job is submitted (a sweep's
trial writing its output into the directory the next trial is submitted from): the job
runs what was packaged. Ray's SDK hashes the directory twice (the URI it puts in the job,
then the one it uploads) and a change between the two left the job naming a package that
was never uploaded ("Failed to download runtime_env file package", a full run's Ray sweep).
The change is forced at the SDK's first hash; on the private Ray head."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def test_a_working_dir_that_changes_during_submit_runs_what_was_packaged(apps: Any, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import ray._private.runtime_env.working_dir as working_dir

    (tmp_path / "data.txt").write_text("packaged\n")
    real = working_dir.get_uri_for_directory
    changed = []

    def hash_then_change(directory: str, *args: Any, **kwargs: Any) -> str:
        uri = real(directory, *args, **kwargs)
        if Path(directory).resolve() == tmp_path.resolve():  # never the driver package's directory
            (tmp_path / f"out-{len(changed)}.txt").write_text("a trial's output\n")
            changed.append(uri)
        return uri

    monkeypatch.setattr(working_dir, "get_uri_for_directory", hash_then_change)
    app_id = apps.submit([apps.role("w", "cat data.txt; ls out-*.txt 2>/dev/null | wc -l")], name="pkg")
    desc = apps.wait(app_id)
    assert desc.state.name == "SUCCEEDED", (desc.msg, desc.structured_error_msg)
    out = apps.text(app_id, "w").split()
    assert out[0] == "packaged", out
    # what the job ran is one zip of the directory: the output written during the submit is
    # there or not, as it was when the directory was packaged (never a package that was not uploaded)
    assert out[1] in ("0", str(len(changed))), out
