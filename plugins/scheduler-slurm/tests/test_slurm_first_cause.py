"""Which failed replica is a Slurm app's cause when a DDP rank raises and its peers then fail
in their next collective (portability[slurm] on x6: rank 0's ``Connection closed by peer``
was recorded 'first' and named as the cause, where rank 1's RuntimeError was). Plain files
in tmp_path, as the batch script leaves them; no cluster."""

from pathlib import Path

from tx.specs import AppState, ReplicaStatus
from tx_scheduler_slurm._status import _first_cause
from tx.testing.failures import peer_lost_text, raised_text

PEER = peer_lost_text(path="/w/fail.py", peer="127.0.0.1:158")
RAISED = raised_text(path="/w/fail.py", message="matrix rank 1 fails on purpose")


def _failure(tmp_path: Path, idx: int, when: float, text: str):
    err = tmp_path / f"fail-{idx}.err"
    err.write_text(text)
    rep = ReplicaStatus(id=idx, state=AppState.FAILED, role="fail", hostname="n1", exit_code=1)
    return (when, f"replica fail/{idx} exited with code 1", str(err), 1, rep)


def test_the_rank_that_raised_is_the_cause_not_the_peer_that_saw_it_go(tmp_path: Path) -> None:
    peer, raised = _failure(tmp_path, 0, 100.0, PEER), _failure(tmp_path, 1, 100.4, RAISED)
    for failures in ([peer, raised], [raised, peer]):
        (when, _line, _err, _code, rep), cause = _first_cause(failures)
        assert (rep.id, when) == (1, 100.4)
        assert cause is not None and (cause.rank, cause.exception_type, cause.message, cause.line) == \
            (1, "RuntimeError", "matrix rank 1 fails on purpose", 5)


def test_only_lost_peers_or_a_later_failure_keep_the_first(tmp_path: Path) -> None:
    # every replica only saw a peer go: the first is named
    a, b = _failure(tmp_path, 0, 100.0, PEER), _failure(tmp_path, 1, 100.5, PEER.replace("rank0", "rank1"))
    assert _first_cause([b, a])[0][4].id == 0
    # a failure long after the first is another failure, not the same one's cause
    late = _failure(tmp_path, 1, 230.0, RAISED)  # more than LATE_CAUSE_S (2 min) after
    (_w, _l, _e, _c, rep), cause = _first_cause([a, late])
    assert rep.id == 0 and cause is not None and "Connection closed by peer" in cause.message


def test_a_programs_own_socket_error_is_its_cause_not_a_lost_peer(tmp_path: Path) -> None:
    """Only a collective's socket errors are a lost peer: a rank whose program died of its
    own BrokenPipeError (or a reset HTTP connection) first is the cause, even when another
    rank raises something else right after."""
    for text in ("BrokenPipeError: [Errno 32] Broken pipe",
                 "requests.exceptions.ConnectionError: ('Connection aborted.', "
                 "ConnectionResetError(104, 'Connection reset by peer'))"):
        own = _failure(tmp_path, 0, 100.0, "[rank0]: Traceback (most recent call last):\n"
                       '[rank0]:   File "/w/fetch.py", line 9, in <module>\n'
                       f"[rank0]:     send()\n[rank0]: {text}\n")
        other = _failure(tmp_path, 1, 100.5, RAISED)
        (_w, _l, _e, _c, rep), cause = _first_cause([other, own])
        assert rep.id == 0 and cause is not None and cause.rank == 0, (text, cause)
    # a collective's broken pipe is still a lost peer
    gloo = PEER.replace("Connection closed by peer", "Write error [127.0.0.1]:39612: Broken pipe")
    assert _first_cause([_failure(tmp_path, 0, 100.0, gloo), _failure(tmp_path, 1, 100.4, RAISED)])[0][4].id == 1
