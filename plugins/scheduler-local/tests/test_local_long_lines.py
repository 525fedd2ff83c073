"""Lines longer than combined.log's 8 MiB piece size, relayed by a real ``tx run``: every
byte the replica wrote comes back, each line once under its prefix, no empty line added,
no two lines glued together (the other stream's lines wait until the long line ends)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from tx_scheduler_local import _relay

BIN = Path(sys.executable).parent
MIB = 1 << 20
PIECE = _relay._MAX_PARTIAL  # combined.log writes a line longer than this in pieces

#: name -> the replica's writes in order: (stream, bytes), long ones being one byte repeated
CASES: Dict[str, List[tuple]] = {
    "10 MiB without newline, then exit": [("out", b"x" * (10 * MIB))],
    "10 MiB without newline, then a short line on stdout": [("out", b"x" * (10 * MIB)), ("out", b"short\n")],
    "10 MiB without newline, then a short line on stderr": [("out", b"x" * (10 * MIB)), ("err", b"short\n")],
    "a line one byte over the piece size, then a short line on stderr": [("out", b"x" * (PIECE + 1)), ("err", b"short\n")],
    "stderr around a long stdout line, its last line unterminated": [
        ("err", b"short\n"), ("out", b"x" * (PIECE + 1)), ("err", b"tail-no-nl")],
}


def _script(writes: List[tuple]) -> str:
    lines = ["import sys, time"]
    for stream, data in writes:
        f = "sys.stdout" if stream == "out" else "sys.stderr"
        text = f"{data[:1]!r} * {len(data)}" if len(data) > 64 else repr(data)  # long ones: one byte repeated
        lines.append(f"{f}.buffer.write({text}); {f}.flush()")
        lines.append("time.sleep(0.2)")
    return "\n".join(lines) + "\n"


def _lines(data: bytes) -> List[bytes]:
    """The lines of one stream as relayed: each ``\\n``-ended, an unterminated last line ended."""
    parts = data.split(b"\n")
    return parts[:-1] + ([parts[-1]] if parts[-1] else [])


@pytest.mark.parametrize("case", list(CASES))
def test_tx_run_relays_every_byte_of_long_lines(case: str, tmp_path: Path) -> None:
    writes = CASES[case]
    (tmp_path / "w.py").write_text(_script(writes))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TX_") and k != "LOGLEVEL"}
    env.update(TX_STATE_DIR=str(tmp_path / "state"), HOME=str(tmp_path / "home"),
               PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    p = subprocess.run([str(BIN / "tx"), "run", "-s", "local_cwd", "utils.python", "--script", "w.py"],
                       cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    relayed_err = p.stderr.split(b"\n")
    assert relayed_err[-1] == b"" and relayed_err[-2].startswith(b"tx run: SUCCEEDED"), p.stderr[-500:]
    relayed_out = p.stdout.split(b"\n")
    assert relayed_out[0].startswith(b"local_cwd://") and relayed_out[-1] == b"", p.stdout[-500:]
    # the replica's stdout on tx's stdout, its stderr on tx's stderr, each in order
    for body, stream in ((relayed_out[1:-1], "out"), (relayed_err[:-2], "err")):
        assert all(ln.startswith(b"python/0 ") for ln in body), [ln[:40] for ln in body]
        got = [ln[len(b"python/0 "):] for ln in body]
        want = _lines(b"".join(d for s, d in writes if s == stream))
        assert got == want, ([(len(g), g[:8], g[-8:]) for g in got], [(len(w), w[:8], w[-8:]) for w in want])


@pytest.mark.parametrize("first", ["long line's stream", "held stream"])
def test_combined_log_ends_lines_once_whichever_stream_closes_first(tmp_path: Path, first: str) -> None:
    """ReplicaLogs alone, both orders of the pipes closing: the held stream's ended line
    gets no second ``\\n``, and the long line, whose last piece went out whole, gets its
    ``\\n`` before the held lines come."""
    logs = _relay.ReplicaLogs(str(tmp_path / "r"))
    big = b"y" * (PIECE + 1)
    logs.write(_relay.OUT, big, 1.0)  # over the piece size: written whole, the line open
    logs.write(_relay.ERR, b"e1\n", 1.0)  # held until the long line ends
    order = (_relay.OUT, _relay.ERR) if first == "long line's stream" else (_relay.ERR, _relay.OUT)
    for stream in order:
        logs.close_stream(stream)
    logs.close()
    assert (tmp_path / "r" / "combined.log").read_bytes() == big + b"\n" + b"e1\n"
    assert (tmp_path / "r" / "stdout.log").read_bytes() == big
    assert (tmp_path / "r" / "stderr.log").read_bytes() == b"e1\n"
