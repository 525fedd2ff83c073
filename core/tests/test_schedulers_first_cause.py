"""tx.schedulers.why.first_cause: which failed replica is an app's cause when a DDP rank raises
and its peers then fail in their next collective (the peers' "Connection closed by peer" may
be recorded first). Plain records; no backend."""
from __future__ import annotations

import math
from typing import Dict, List, NamedTuple, Optional

import pytest

from tx.schedulers import LATE_CAUSE_S, ONE_FAILURE_S, PEER_LOST, first_cause, lost_peer
from tx.schedulers.why import root_cause
from tx.specs import RootCause
from tx.testing.failures import peer_lost_text, raised_text

PEER = peer_lost_text(path="/w/fail.py", peer="127.0.0.1:158")
RAISED = raised_text(path="/w/fail.py")


class Failed(NamedTuple):
    replica: int
    ended: float  # s
    log: str


def _cause(f: Failed) -> Optional[RootCause]:
    return root_cause("train", f.replica, f.log, exit_code=1) if f.log else None


class Counted:
    """``cause_of`` that records which failures it was asked about."""

    def __init__(self) -> None:
        self.asked: List[int] = []

    def __call__(self, f: Failed) -> Optional[RootCause]:
        self.asked.append(f.replica)
        return _cause(f)


def test_the_rank_that_raised_wins_over_the_peer_that_ended_first() -> None:
    peer, raised = Failed(0, 100.0, PEER), Failed(1, 100.4, RAISED)
    for failures in ([peer, raised], [raised, peer]):
        chosen, cause = first_cause(failures, lambda f: f.ended, _cause)
        assert chosen == raised
        assert cause is not None and (cause.replica, cause.rank, cause.exception_type, cause.message) == (
            1, 1, "RuntimeError", "rank 1 fails on purpose")


def test_a_real_cause_after_the_window_wins_only_where_every_one_in_it_lost_a_peer() -> None:
    """The rank that raised can end long after the peer that lost it: its torchrun agent
    closes its rendezvous on the store the peer's agent hosted and took with it, and waits
    out the store's 60 s timeout (the LSF portability column, c2). Where every failure in
    the window lost a peer, it still wins within LATE_CAUSE_S; not where one in the window,
    or one before it, names nothing (an unexplained failure may be the source)."""
    peer = Failed(0, 100.0, PEER)
    at_edge = Failed(1, 100.0 + ONE_FAILURE_S, RAISED)
    late = Failed(1, 100.0 + 45.0, RAISED)
    too_late = Failed(1, 100.0 + LATE_CAUSE_S + 0.001, RAISED)
    assert first_cause([peer, at_edge], lambda f: f.ended, _cause)[0] == at_edge  # within: 10 s after
    asked = Counted()
    chosen, cause = first_cause([late, peer], lambda f: f.ended, asked)
    assert chosen == late and cause is not None and cause.rank == 1 and asked.asked == [0, 1]
    chosen, cause = first_cause([too_late, peer], lambda f: f.ended, _cause)
    assert chosen == peer and cause is not None and lost_peer(cause) and cause.rank == 0
    # a failure that names nothing, in the window or after it before the late one: the first stays
    unnamed_in, unnamed_after = Failed(2, 103.0, ""), Failed(2, 112.0, "")
    assert first_cause([peer, unnamed_in, late], lambda f: f.ended, _cause)[0] == peer
    assert first_cause([peer, unnamed_after, late], lambda f: f.ended, _cause)[0] == peer
    # another lost peer in between is passed over
    assert first_cause([peer, Failed(2, 130.0, PEER), Failed(3, 140.0, RAISED)], lambda f: f.ended,
                       _cause)[0].replica == 3
    # the windows are the caller's to set
    assert first_cause([peer, late], lambda f: f.ended, _cause, late_s=40.0)[0] == peer
    assert first_cause([peer, unnamed_after, late], lambda f: f.ended, _cause, window_s=50.0)[0] == late


def test_only_lost_peers_name_the_first_with_its_own_cause() -> None:
    a, b = Failed(0, 100.0, PEER), Failed(1, 100.5, PEER.replace("rank0", "rank1"))
    chosen, cause = first_cause([b, a], lambda f: f.ended, _cause)
    assert chosen == a and cause is not None and "Connection closed by peer" in cause.message


def test_failures_that_name_nothing_are_passed_over_and_the_first_kept() -> None:
    quiet, peer, raised = Failed(0, 100.0, ""), Failed(1, 100.2, PEER), Failed(2, 100.3, RAISED)
    assert first_cause([quiet, peer], lambda f: f.ended, _cause) == (quiet, None)  # nothing better: the first
    assert first_cause([peer, quiet, raised], lambda f: f.ended, _cause)[0] == raised
    chosen, cause = first_cause([quiet, peer, raised], lambda f: f.ended, _cause)
    assert chosen == raised and cause is not None and cause.rank == 1


def test_causes_are_computed_lazily_in_time_order_within_the_window() -> None:
    raised, peer = Failed(1, 100.3, RAISED), Failed(0, 100.0, PEER)
    late, later = Failed(2, 100.0 + LATE_CAUSE_S + 10, RAISED), Failed(3, 100.0 + LATE_CAUSE_S + 20, PEER)
    asked = Counted()
    assert first_cause([later, raised, late, peer], lambda f: f.ended, asked)[0] == raised
    assert asked.asked == [0, 1]  # the peer, then the one that raised; never the later ones
    asked = Counted()
    assert first_cause([later, late, Failed(0, 100.0, PEER)], lambda f: f.ended, asked)[0].replica == 0
    assert asked.asked == [0]  # nothing else within 10 s of it, nor within LATE_CAUSE_S: one read


def test_a_failure_the_scheduler_explains_itself_is_a_cause_without_a_log() -> None:
    """An out-of-memory kill the backend reports (``known``) comes before a lost peer that
    ended first, and its log is not read."""
    peer, oom = Failed(0, 100.0, PEER), Failed(1, 100.5, "")
    asked = Counted()
    chosen, cause = first_cause([peer, oom], lambda f: f.ended, asked, known=lambda f: f.replica == 1)
    assert (chosen, cause) == (oom, None) and asked.asked == [0]
    # but a real cause that ended before it still wins
    raised = Failed(2, 100.2, RAISED)
    assert first_cause([peer, oom, raised], lambda f: f.ended, _cause, known=lambda f: f.replica == 1)[0] == raised


def test_unknown_end_times_come_last_and_ties_keep_the_given_order() -> None:
    times: Dict[int, float] = {0: math.inf, 1: 100.0, 2: math.inf}
    a, b, c = Failed(0, 0, PEER), Failed(1, 0, PEER), Failed(2, 0, RAISED)
    assert first_cause([a, b, c], lambda f: times[f.replica], _cause)[0] == b  # only b's end is known
    # with no end known, every failure is one failure: the one that raised wins
    assert first_cause([a, c], lambda f: math.inf, _cause)[0] == c
    # a tie: the given order (a scheduler passes its replicas in index order)
    assert first_cause([Failed(5, 1.0, ""), Failed(4, 1.0, "")], lambda f: f.ended, _cause)[0].replica == 5
    with pytest.raises(ValueError):
        first_cause([], lambda f: 0.0, _cause)


@pytest.mark.parametrize("text, lost", [
    ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [1.2.3.4]:5", True),
    ("RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:593] Write error [1.2.3.4]:9: Broken pipe",
     True),
    ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or there "
     "was a network error", True),
    ("torch.distributed.DistNetworkError: failed to recv, got 0 bytes", True),
    # a Slurm column of the portability matrix: replica 0's torchrun lost the store that
    # replica 1's agent hosted (both on 127.0.0.1) when rank 1 raised
    ("torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has "
     "failed. See inner exception for details.", True),
    ("torch.distributed.elastic.rendezvous.api.RendezvousClosedError", True),
    ("BrokenPipeError: [Errno 32] Broken pipe", False),
    ("requests.exceptions.ConnectionError: ('Connection aborted.', ConnectionResetError(104, "
     "'Connection reset by peer'))", False),
    ("RuntimeError: CUDA out of memory", False),
])
def test_what_counts_as_a_lost_peer(text: str, lost: bool) -> None:
    """A collective's socket errors and the store's network errors are a lost peer (also by
    the exception's type alone); a program's own socket errors are its cause."""
    exc, _, msg = text.partition(": ")
    assert lost_peer(RootCause("train", 0, exception_type=exc, message=msg)) is lost
    assert (PEER_LOST.search(text) is not None) is lost
    assert not lost_peer(None)
