"""Plain text in the CLI: reStructuredText markup of docstrings made plain, and color only
on a terminal that wants it (NO_COLOR, FORCE_COLOR, TERM=dumb)."""
from __future__ import annotations

import pytest

from tx.cli._text import plain, use_color


@pytest.mark.parametrize("rst,text", [
    ("runs ``torchrun`` (``-j 2x4``)", "runs torchrun (-j 2x4)"),
    ("see :func:`tx.specs.resource` and :py:class:`~tx.specs.Role`", "see tx.specs.resource and tx.specs.Role"),
    ("the `TorchX docs <https://pytorch.org/torchx>`_", "the TorchX docs (https://pytorch.org/torchx)"),
    ("**must** exist", "must exist"),
    ("Example::\n\n    tx run", "Example:\n\n    tx run"),
    (".. note:: slow", "Note: slow"),
    ("plain `tx run` stays", "plain `tx run` stays"),
])
def test_plain(rst, text):
    assert plain(rst) == text


def test_use_color(monkeypatch):
    class Tty:
        def isatty(self):
            return True

    for k in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(k, raising=False)
    assert use_color(Tty()) and not use_color(object())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(Tty())
    monkeypatch.setenv("NO_COLOR", "")
    monkeypatch.setenv("TERM", "dumb")
    assert not use_color(Tty())
