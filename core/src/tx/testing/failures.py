"""What the ranks of a DDP job write to stderr when one of them raises, for the tests of a
scheduler's failure reports: the text a replica's log holds, to test which replica a
scheduler names as an app's cause (:func:`tx.schedulers.why.first_cause`) without running a
DDP job. The shapes are torch 2.x's: torchrun's ``[rankN]:`` prefix (``--tee``/``local_ranks_filter``
off) and gloo's message when a peer's process died (``gloo/transport/tcp/pair.cc``)::

    from tx.testing.failures import peer_lost_text, raised_text

    logs = {0: peer_lost_text(rank=0), 1: raised_text(rank=1)}  # rank 0 only lost rank 1
"""
from __future__ import annotations

from typing import Optional

__all__ = ["peer_lost_text", "raised_text"]


def raised_text(rank: int = 1, message: Optional[str] = None, path: str = "/job/fail.py", line: int = 5) -> str:
    """The traceback rank ``rank`` prints when its program raises ``RuntimeError(message)``
    (default ``"rank <rank> fails on purpose"``) at ``path``:``line``; lines end in ``\\n``.
    Its root cause (:func:`tx.schedulers.why.root_cause`) is that exception at that line."""
    message = f"rank {rank} fails on purpose" if message is None else message
    return (f"[rank{rank}]: Traceback (most recent call last):\n"
            f'[rank{rank}]:   File "{path}", line {line}, in <module>\n'
            f'[rank{rank}]:     raise RuntimeError("{message}")\n'
            f"[rank{rank}]: RuntimeError: {message}\n")


def peer_lost_text(rank: int = 0, peer: str = "127.0.0.1:41234", path: str = "/job/fail.py", line: int = 6) -> str:
    """The traceback rank ``rank`` prints when the process of its peer at ``peer``
    (``host:port``) died during a collective (``dist.barrier()`` at ``path``:``line``):
    gloo's "Connection closed by peer", which :data:`tx.schedulers.why.PEER_LOST` matches (a
    symptom, never the app's cause); lines end in ``\\n``."""
    host, _, port = peer.rpartition(":")
    return (f"[rank{rank}]: Traceback (most recent call last):\n"
            f'[rank{rank}]:   File "{path}", line {line}, in <module>\n'
            f"[rank{rank}]:     dist.barrier()\n"
            f"[rank{rank}]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
            f"[{host}]:{port}. This is typically caused by a remote worker crashing.\n")
