"""``tx status``, ``tx describe`` and ``tx cancel`` of an app its scheduler does not know: one
line, exit 1; where tx's log archive holds the app's logs (a Ray head that restarted, a purged
Slurm job), the line says how to read them. The archive is the real one (a directory under
the state directory); the scheduler is local_cwd, which knows no such app."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tx.cli.main import main
from tx.runner.archive import LogArchive

HANDLE = "local_cwd://tx/gone-app-1"
PLAIN = f"app {HANDLE} does not exist (or its scheduler no longer keeps it)"


@pytest.fixture
def archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LogArchive]:
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    yield LogArchive(str(tmp_path / "state" / "logs"))


def _last_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 1 and out == "", (code, out, err)
    assert "Traceback" not in err, err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize("command", ["status", "describe", "cancel"])
def test_unknown_app_points_at_the_archive(archive: LogArchive, capsys: pytest.CaptureFixture[str],
                                           command: str) -> None:
    assert _last_line(capsys, command, HANDLE).endswith(PLAIN)  # nothing archived: the plain line
    archive.copy(HANDLE, [("sh", 0)], lambda role, k: [b"hello\n"], ended="SUCCEEDED")
    assert _last_line(capsys, command, HANDLE).endswith(f"{PLAIN}; tx's log archive has its logs: tx log {HANDLE}")


def test_an_unreadable_archive_leaves_the_plain_line(archive: LogArchive, capsys: pytest.CaptureFixture[str]) -> None:
    archive.copy(HANDLE, [("sh", 0)], lambda role, k: [b"hello\n"], ended="SUCCEEDED")
    damaged = list(Path(archive.app_dir(HANDLE)).glob("*.json"))
    assert damaged
    for f in damaged:
        f.write_text("{damaged")
    assert _last_line(capsys, "status", HANDLE).endswith(PLAIN)
