"""TorchX 0.7.0's documented workspace helpers in tx-torchx-compat: ``walk_workspace``
(ignore file honoured) and ``DirWorkspaceMixin`` (a nested ``job_dir`` is created with its
parents; an existing one is refused)."""
import os
from pathlib import Path

import pytest


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "build").mkdir()
    (ws / "train.sh").write_text("echo hi\n")
    (ws / "train.sh").chmod(0o755)
    (ws / "pkg" / "m.py").write_text("x = 1\n")
    (ws / "pkg" / "m.pyc").write_text("")
    (ws / "build" / "out.bin").write_text("")
    (ws / ".torchxignore").write_text("build/\n*.pyc\n")
    return ws


def test_walk_workspace_leaves_out_ignored(tmp_path: Path) -> None:
    import fsspec

    from torchx.workspace import walk_workspace

    ws = _workspace(tmp_path)
    fs = fsspec.filesystem("file")
    seen = {os.path.relpath(d, ws): sorted(files) for d, _dirs, files in walk_workspace(fs, str(ws))}
    assert seen == {".": [".torchxignore", "train.sh"], "pkg": ["m.py"]}


def test_dir_workspace_creates_nested_job_dir(tmp_path: Path) -> None:
    from torchx.specs import Role
    from torchx.workspace.dir_workspace import DirWorkspaceMixin

    class Mixin(DirWorkspaceMixin):
        pass

    ws = _workspace(tmp_path)
    job_dir = tmp_path / "runs" / "2026" / "job1"
    role = Role("r", image="unused", entrypoint="sh")
    Mixin().build_workspace_and_update_role(role, str(ws), {"job_dir": str(job_dir)})
    assert role.image == str(job_dir)
    files = sorted(str(p.relative_to(job_dir)) for p in job_dir.rglob("*") if p.is_file())
    assert files == [".torchxignore", "pkg/m.py", "train.sh"]
    assert os.access(job_dir / "train.sh", os.X_OK)
    assert "job_dir" in Mixin().workspace_opts()
    with pytest.raises(FileExistsError, match="already exists"):
        Mixin().build_workspace_and_update_role(Role("r", image=""), str(ws), {"job_dir": str(job_dir)})
    untouched = Role("r", image="img")
    Mixin().build_workspace_and_update_role(untouched, str(ws), {})
    assert untouched.image == "img"
