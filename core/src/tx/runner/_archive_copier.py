"""``python -m tx.runner._archive_copier SESSION HANDLE URL``: the last copy of an app's logs
into tx's log archive (:mod:`tx.runner.archive`), made off the waiting process's path.

When :meth:`tx.runner.Runner.wait` sees an app of a scheduler whose replicas run on this
host (``runs_on_host``: local_cwd, local_dir, local_docker) end, it does not copy the logs
itself: it starts this process (:func:`tx.runner.archiver._start_copier`), detached (its
own session, stdin/stdout/stderr on /dev/null), and returns. The copier does what a later
``tx status`` would: it copies what is new in each replica's log and marks the app's
archive ``complete`` (once; an archive already complete is left as it is). It needs no
lock: copiers racing with each other or with a ``tx status``/``tx log`` of the same app
keep the archive a prefix of the log (docs/recovery.md). When it cannot write the archive
(a full disk) the app stays incomplete, and the next tx command that looks at the app
copies the rest and warns.
"""
from __future__ import annotations

import sys
from typing import List

from tx.runner.api import Runner
from tx.runner.archive import LogArchive

__all__ = ["main"]


def main(argv: List[str]) -> int:
    """Copy the logs of app ``argv[1]`` of session ``argv[0]`` into the archive at
    ``argv[2]`` and mark it complete when the app has ended; 0, or 2 on bad arguments."""
    if len(argv) != 3:
        print("usage: python -m tx.runner._archive_copier SESSION HANDLE URL", file=sys.stderr)
        return 2
    session, handle, url = argv
    with Runner(session) as runner:
        runner.log_archive = LogArchive(url)
        runner.archive_logs(handle, catch_up=True)  # never raises
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
