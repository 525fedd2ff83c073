"""``python -m tx.runner._sweep_supervisor SWEEP_HANDLE``: submit a sweep's pending trials
as others finish, at most ``max_parallel`` running at once, then exit.

Started by :func:`tx.runner.sweep.start_supervisor` for schedulers without a native array
(local_cwd, local_dir, ...), detached from the process that ran ``tx sweep``. It stops when
no trial is pending or the sweep is cancelled; ``tx sweep resume`` starts a new one.
"""
from __future__ import annotations

import sys
import time
from typing import List, Optional

from tx.runner.api import Runner
from tx.runner.sweep import load_record, submit_pending

#: seconds between two looks at the running trials
POLL_S = 1.0


def main(argv: Optional[List[str]] = None) -> int:
    """Run the supervisor for the sweep handle in ``argv[0]``; returns the exit code."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tx.runner._sweep_supervisor SWEEP_HANDLE", file=sys.stderr)
        return 2
    handle = args[0]
    rec = load_record(handle)
    with Runner(rec.session) as runner:
        while submit_pending(runner.engine, handle):
            time.sleep(POLL_S)
    return 0


if __name__ == "__main__":
    sys.exit(main())
