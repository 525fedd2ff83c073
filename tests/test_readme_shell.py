"""The README's "Using tx" commands, as written, in a new shell (``env -i``: no variables of
this session, no activated environment), from a clone whose ``.venv`` is this environment.
The install commands before them are not run here (they download torch); the "other
schedulers" block's ``pip install ./plugins/...`` would replace this environment's editable
installs, so it is left out too."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tx.testing.backends import backend_unavailable, require_module

REPO = Path(__file__).resolve().parent.parent
VENV = Path(sys.executable).parent.parent

pytestmark = pytest.mark.slow
require_module("torch", "the README's commands train with torch: pip install torch==2.13.0")
require_module("shtab", "the README's last command sources the completion script: pip install shtab")


def _using_tx_block() -> str:
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Using tx"):]
    m = re.search(r"```sh\n(.*?)```", section, re.S)
    assert m is not None, "no sh block under 'Using tx'"
    return m.group(1)


def test_using_tx_runs_as_written_in_a_new_shell(tmp_path):
    if not (VENV / "bin" / "activate").is_file():
        backend_unavailable("a virtual environment", f"{VENV} has no bin/activate to stand for the README's .venv: "
                            "run the tests from a venv (hatch's test environment is one)")
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / "examples").symlink_to(REPO / "examples")
    (clone / ".venv").symlink_to(VENV)
    block = _using_tx_block()
    assert block.startswith(". .venv/bin/activate\n"), block
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    # one marker line after each command: which command failed, and its output
    script = "".join(f"{line}\necho \"@@ $? {i}\"\n" for i, line in enumerate(block.splitlines()))
    p = subprocess.run(["env", "-i", f"HOME={home}", f"TMPDIR={tmp}", "PATH=/usr/bin:/bin", "bash", "--norc",
                        "--noprofile", "-c", script], cwd=str(clone), capture_output=True, text=True, timeout=300)
    codes = re.findall(r"^@@ (\d+) (\d+)$", p.stdout, re.M)
    lines = block.splitlines()
    failed = [lines[int(i)] for code, i in codes if code != "0"]
    assert len(codes) == len(lines) and not failed, (failed, p.stdout[-3000:], p.stderr[-3000:])
    assert "accuracy=0.97" in p.stdout  # the job's stdout through `| grep`
    assert re.search(r"^train/0 .*test_accuracy=0\.\d+", p.stdout, re.M), p.stdout[-3000:]
    assert "tx run: launched local_cwd://tx/" in p.stderr and "to follow it:" in p.stderr
