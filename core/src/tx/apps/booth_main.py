"""Evaluate the Booth function and record the result (a hyperparameter-optimization demo):
``python -m tx.apps.booth_main --x1 1 --x2 3 [--trial_idx 0] [--tracker_base URL]``.

``f(x1, x2) = (x1 + 2*x2 - 7)^2 + (2*x1 + x2 - 5)^2`` (minimum 0 at (1, 3)). The result is
written as JSON ``{"booth_eval": f, "x1": x1, "x2": x2}`` to ``TRACKER_BASE/TRIAL_IDX.json``
(any fsspec URL), one file per trial, as TorchX's ``FsspecResultTracker`` does.
"""
import argparse
import json
import sys
from typing import Any, Dict, List, Optional

import fsspec

__all__ = ["booth", "main", "parse_args", "read_result", "result_path", "write_result"]


def booth(x1: float, x2: float) -> float:
    """The Booth function at ``(x1, x2)``."""
    return (x1 + 2 * x2 - 7) ** 2 + (2 * x1 + x2 - 5) ** 2


def result_path(tracker_base: str, trial_idx: int) -> str:
    """Where the result of trial ``trial_idx`` is written."""
    return f"{tracker_base.rstrip('/')}/{trial_idx}.json"


def write_result(tracker_base: str, trial_idx: int, result: Dict[str, Any]) -> str:
    """Write ``result`` as JSON for trial ``trial_idx``; returns the file's URL."""

    path = result_path(tracker_base, trial_idx)
    with fsspec.open(path, "w", auto_mkdir=True) as f:
        json.dump(result, f)
    return path


def read_result(tracker_base: str, trial_idx: int) -> Dict[str, Any]:
    """Read back the result of trial ``trial_idx``.

    Raises:
        FileNotFoundError: the trial has no result.
    """

    with fsspec.open(result_path(tracker_base, trial_idx), "r") as f:
        return json.load(f)


def parse_args(argv: List[str]) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(prog="python -m tx.apps.booth_main", description="evaluate the Booth function")
    parser.add_argument("--x1", type=float, required=True, help="first coordinate")
    parser.add_argument("--x2", type=float, required=True, help="second coordinate")
    parser.add_argument("--trial_idx", type=int, default=0, help="trial number (names the result file)")
    parser.add_argument("--tracker_base", default="/tmp/tx-util-booth", help="results directory or fsspec URL")
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    """Run the program; returns the exit status."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    value = booth(args.x1, args.x2)
    print(f"booth({args.x1}, {args.x2}) = {value}", flush=True)
    try:
        path = write_result(args.tracker_base, args.trial_idx, {"booth_eval": value, "x1": args.x1, "x2": args.x2})
    except OSError as e:
        print(f"error: cannot write the result: {e}", file=sys.stderr)
        return 1
    print(f"wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
