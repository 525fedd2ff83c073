"""Run a command and stop it on a condition:
``python -m tx.apps.process_monitor [--timeout S] [--start_on_file URL] [--exit_on_file URL]
[--poll_rate S] [--kill_timeout S] -- COMMAND [ARGS...]``.

* ``--start_on_file``: wait until this file (fsspec URL or path) exists before starting.
* ``--exit_on_file``: stop the command when this file appears; the monitor then exits 0.
* ``--timeout``: seconds (counted from the monitor's start) after which the command is
  stopped, or never started; the monitor then exits :data:`TIMEOUT_EXIT_CODE`.
* Otherwise the monitor exits with the command's status (128 + N if killed by signal N).

Stopping sends SIGTERM, then SIGKILL after ``--kill_timeout`` seconds. SIGTERM and SIGINT
sent to the monitor are forwarded to the command.
"""
import argparse
import signal
import subprocess
import sys
import time
from typing import Any, List, Optional

import fsspec

__all__ = ["exists", "exit_status", "main", "parse_args", "stop", "TIMEOUT_EXIT_CODE"]

TIMEOUT_EXIT_CODE = 34


def parse_args(argv: List[str]) -> argparse.Namespace:
    """Parse the command line; the command follows the options (after ``--``)."""
    parser = argparse.ArgumentParser(
        prog="python -m tx.apps.process_monitor",
        description="runs a command and stops it on a timeout or when a file appears",
    )
    parser.add_argument("--timeout", type=float, default=None, help="seconds before the command is stopped")
    parser.add_argument("--start_on_file", default="", help="start the command once this fsspec path exists")
    parser.add_argument("--exit_on_file", default="", help="stop the command (exit 0) when this fsspec path exists")
    parser.add_argument("--poll_rate", type=float, default=5.0, help="seconds between checks")
    parser.add_argument("--kill_timeout", type=float, default=60.0, help="seconds between SIGTERM and SIGKILL")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command and its arguments")
    args = parser.parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        parser.error("no command given (put it after --)")
    if args.poll_rate <= 0:
        parser.error("--poll_rate must be > 0")
    return args


def exists(url: str) -> bool:
    """Whether the file ``url`` (fsspec URL or path) exists now (no cached listing)."""

    fs, path = fsspec.core.url_to_fs(url)
    fs.invalidate_cache()
    return bool(fs.exists(path))


def exit_status(returncode: int) -> int:
    """A Popen return code as a process exit status (a signal N gives 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode


def stop(proc: "subprocess.Popen[Any]", kill_timeout: float) -> int:
    """SIGTERM ``proc``, SIGKILL it after ``kill_timeout`` seconds; returns its return code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(kill_timeout)
        except subprocess.TimeoutExpired:
            print("command did not stop in time, killing it", flush=True)
            proc.kill()
    return proc.wait()


def main(argv: Optional[List[str]] = None) -> int:
    """Run the monitor; returns its exit status (see the module docstring)."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    start = time.monotonic()
    deadline = start + args.timeout if args.timeout else None

    def remaining() -> float:
        return float("inf") if deadline is None else deadline - time.monotonic()

    if args.start_on_file:
        print(f"waiting for {args.start_on_file} before starting", flush=True)
        while not exists(args.start_on_file):
            if remaining() <= 0:
                print("timeout reached before the command started", flush=True)
                return TIMEOUT_EXIT_CODE
            time.sleep(max(0.0, min(args.poll_rate, remaining())))
    try:
        proc = subprocess.Popen(args.command)
    except OSError as e:
        print(f"error: cannot start {args.command[0]}: {e}", file=sys.stderr, flush=True)
        return 127

    def forward(signum: int, _frame: Any) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    print(f"started {args.command[0]} (pid {proc.pid})", flush=True)

    while True:
        try:
            rc = proc.wait(max(0.0, min(args.poll_rate, remaining())))
        except subprocess.TimeoutExpired:
            pass
        else:
            print(f"command exited with status {exit_status(rc)}", flush=True)
            return exit_status(rc)
        if remaining() <= 0:
            print(f"timeout of {args.timeout}s reached, stopping the command", flush=True)
            stop(proc, args.kill_timeout)
            return TIMEOUT_EXIT_CODE
        if args.exit_on_file and exists(args.exit_on_file):
            print(f"{args.exit_on_file} exists, stopping the command", flush=True)
            stop(proc, args.kill_timeout)
            return 0


if __name__ == "__main__":
    sys.exit(main())
