"""What several benches share: the repository's paths, free ports, a private Slurm cluster
(scripts/start-slurm.sh, as the slurm plugin's tests start one) and the two ways their
results tables write times and calls.

Not a bench: the bench scripts beside it import it (their directory is ``sys.path[0]``
when run as ``python bench/NAME.py``, or they put it there).
"""
from __future__ import annotations

import os
import socket
import statistics
import subprocess
from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Union

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"

#: the environment variables of a Slurm client, dropped so that none of the caller's
#: cluster leaks into the private one
_SLURM_VARS = ("SLURM_", "SBATCH_", "SQUEUE_")


def free_port() -> int:
    """A port the kernel says is free now on 127.0.0.1 (it may be taken again before use)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(n: int) -> int:
    """The first of ``n`` consecutive free ports in 20000-29999."""
    for first in range(24000, 29000, 37):
        ok = True
        for port in range(first, first + n):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return first
    raise SystemExit("no free ports")


def start_slurm(base: Path, accounting: bool = False) -> Dict[str, str]:
    """Start a private Slurm cluster of 4 nodes under ``base`` (scripts/start-slurm.sh, its
    own SLURM_BASE and ports; with ``accounting``, slurmdbd and MariaDB too) and point this
    process at it: the caller's ``SLURM_*``/``SBATCH_*``/``SQUEUE_*`` variables removed,
    ``SLURM_CONF`` its slurm.conf, ``TX_STATE_DIR`` ``base/tx-state``.

    Returns:
        The environment the cluster was started with, for :func:`stop_slurm`.

    Raises:
        SystemExit: start-slurm.sh failed (the end of its stderr), or no free ports.
    """
    port = free_ports(8 if accounting else 6)
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SLURM_VARS)}
    env.update(SLURM_BASE=str(base), SLURM_NODES="4", SLURM_CLUSTER_NAME="txbench",
               SLURM_CTLD_PORT=str(port), SLURMD_PORT_BASE=str(port))
    if accounting:
        env.update(SLURM_ACCT="1", SLURMDBD_PORT=str(port + 5), SLURM_MARIADB_PORT=str(port + 6))
    p = subprocess.run(["bash", str(SCRIPTS / "start-slurm.sh")], env=env, capture_output=True, text=True,
                       timeout=180)
    if p.returncode != 0:
        raise SystemExit(f"start-slurm.sh failed: {p.stderr[-2000:]}")
    for k in [k for k in os.environ if k.startswith(_SLURM_VARS)]:
        del os.environ[k]
    os.environ["SLURM_CONF"] = str(base / "etc" / "slurm.conf")
    os.environ["TX_STATE_DIR"] = str(base / "tx-state")
    return env


def stop_slurm(env: Dict[str, str]) -> None:
    """Cancel every job of the cluster :func:`start_slurm` started with ``env``, and stop it."""
    subprocess.run(["scancel", "--user", "root"], capture_output=True, timeout=60)
    subprocess.run(["bash", str(SCRIPTS / "stop-slurm.sh")], env=env, capture_output=True, timeout=120)


def spread(xs: List[float]) -> str:
    """Seconds as the tables write them: the median, and the range of the runs
    (``1.23 s (1.10-1.50)``)."""
    return f"{statistics.median(xs):.2f} s ({min(xs):.2f}-{max(xs):.2f})"


def calls_text(calls: Union[Mapping[str, int], Iterable[str]]) -> str:
    """The calls of one run, ``2 sacct, 1 squeue`` (by name), ``none`` where there were none.

    Args:
        calls: name -> how many times, or the names of the calls in the order made.
    """
    counts = calls if isinstance(calls, Mapping) else Counter(calls)
    return ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "none"


def load_avg() -> str:
    """The 1/5/15-minute load averages, ``5.54/9.33/9.40`` (``?`` where the OS has none)."""
    try:
        return "/".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def git_state() -> Dict[str, str]:
    """The repository's commit and whether its tree differs from it.

    Returns:
        ``{"commit": <40 hex or "unknown">, "dirty": "yes" | "no" | "unknown"}``; "dirty"
        counts tracked changes and untracked files that git does not ignore, except the
        files bench/RESULTS* (what a regeneration writes).
    """
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                                text=True, timeout=30).stdout.strip() or "unknown"
        st = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
        # the results themselves do not count: a regeneration rewrites them one after another
        changed = [ln for ln in st.stdout.splitlines() if not ln[3:].startswith("bench/RESULTS")]
        dirty = ("yes" if changed else "no") if st.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        commit, dirty = "unknown", "unknown"
    return {"commit": commit, "dirty": dirty}


def stamp_text(git: Mapping[str, str], date: str, load_before: str, load_after: str,
               n: Union[int, str], command: str) -> str:
    """The stamp line every RESULTS file carries (bench/regen.py writes and reads it)."""
    return (f"Stamp: commit {git['commit'][:12]} (tree dirty: {git['dirty']}), {date}, "
            f"load average before {load_before}, after {load_after}, n={n}, `{command}`.")
