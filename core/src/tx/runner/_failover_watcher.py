"""``python -m tx.runner._failover_watcher``: follow every unfinished run with failover of
this state directory (:mod:`tx.runner.failover`; but those created with ``watch=False``)
until none is left, then exit.

Started by :func:`tx.runner.failover.ensure_watcher`, detached from the process that ran
``tx run --fallback`` or looked at a run (``tx status``, ``tx log``, ``tx cancel``, a
Runner) and found unfinished runs and no watcher. One watcher per state directory: it holds
``runs/watcher.lock`` (a ``flock``, released by the kernel when it dies; its pid inside),
and a second one exits at once. Each poll costs one status call per backend (a
``Scheduler.list`` where a backend holds several live hops); a run's record is read again
only when its file changed, and a run listed in the state its record has is not stepped
(:func:`tx.runner.failover.poll`): following 2,000 runs, its work per run and tick is a
``stat`` and a look-up (bench/RESULTS-scale.md). Also runnable by hand, or at
boot (docs/recovery.md); it exits at once when no run is left.
"""
from __future__ import annotations

import fcntl
import os
import sys
import time
from typing import Any, Dict, List, Optional

from tx.runner.api import Runner
from tx.runner.failover import list_records, poll, watcher_lock_path
from tx.schedulers.plane import one_look

#: seconds between two polls
POLL_S = 1.0


def _say_pid(lf: Any) -> None:
    """Write this watcher's pid into the lock file it holds (``cat runs/watcher.lock``)."""
    lf.seek(0)
    lf.truncate()
    lf.write(f"{os.getpid()}\n")
    lf.flush()


def main(argv: Optional[List[str]] = None) -> int:
    """Follow the unfinished runs; returns the exit code (0; 0 at once when another
    watcher runs)."""
    path = watcher_lock_path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a+") as lf:
        try:
            fcntl.flock(lf, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0
        _say_pid(lf)
        runners = {}
        cache: Dict[str, Any] = {}  # the records read, by file: one not changed is not read again
        try:
            while True:
                records = list_records(unfinished=True, watched=True, cache=cache)
                if not records:
                    # a run recorded after that look started a watcher (or a look probed,
                    # ensure_watcher) that found the lock held: unlock, look again, and go on
                    # if the lock is still to be had (else its holder reads the records next)
                    fcntl.flock(lf, fcntl.LOCK_UN)
                    if not list_records(unfinished=True, watched=True):
                        return 0
                    try:
                        fcntl.flock(lf, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        return 0
                    _say_pid(lf)
                    continue
                by_session = {}
                for rec in records:
                    by_session.setdefault(rec.session, []).append(rec)
                with one_look():  # a tick is one moment: one snapshot per backend, however long it takes
                    for session, recs in by_session.items():
                        runner = runners.get(session) or runners.setdefault(session, Runner(session))
                        poll(runner.engine, recs)
                time.sleep(POLL_S)
        finally:
            for r in runners.values():
                r.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
