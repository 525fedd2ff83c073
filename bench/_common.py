"""What several benches share: the repository's paths, free ports, a private Slurm cluster
(scripts/start-slurm.sh, as the slurm plugin's tests start one) and the two ways their
results tables write times and calls.

Not a bench: the bench scripts beside it import it (their directory is ``sys.path[0]``
when run as ``python bench/NAME.py``, or they put it there).
"""
from __future__ import annotations

import os
import re
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Tuple, Union

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


def start_slurm(base: Path, accounting: bool = False, settings: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """Start a private Slurm cluster of 4 nodes under ``base`` (scripts/start-slurm.sh, its
    own SLURM_BASE and ports; with ``accounting``, slurmdbd and MariaDB too) and point this
    process at it: the caller's ``SLURM_*``/``SBATCH_*``/``SQUEUE_*`` variables removed,
    ``SLURM_CONF`` its slurm.conf, ``TX_STATE_DIR`` ``base/tx-state``. ``settings``: more of
    start-slurm.sh's variables (``{"SLURM_MAX_ARRAY_SIZE": "10001"}``).

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
    env.update(settings or {})
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


#: one client request type and its count in ``sdiag``'s "statistics by message type"
_RPC = re.compile(r"^\s*(REQUEST_\w+|MESSAGE_\w+)\s+\(\s*\d+\)\s+count:(\d+)", re.MULTILINE)


def sdiag_rpcs() -> Dict[str, int]:
    """slurmctld's count of each RPC type since its statistics were last reset (``sdiag``;
    ``sdiag -r`` resets them), sdiag's own (REQUEST_STATS_INFO) left out."""
    out = subprocess.run(["sdiag"], capture_output=True, text=True, timeout=60, check=True).stdout
    part = out.split("Remote Procedure Call statistics by message type", 1)[1]
    part = part.split("Remote Procedure Call statistics by user", 1)[0]
    return {k: int(v) for k, v in _RPC.findall(part) if k != "REQUEST_STATS_INFO"}


def start_fakekube(base: Path) -> Tuple["subprocess.Popen[bytes]", int]:
    """Start the Kubernetes plugin's test API server (plugins/scheduler-k8s/tests/fakekube:
    one node of 8 CPUs and 8 GiB, its schemas, the tests' admin token) on a free port with
    ``base`` its work directory and ``base/server.log`` its output (one line per request);
    returns the process and its port once it listens, and points ``KUBECONFIG`` at it
    (``base/kubeconfig``). Stop it with ``terminate()``.

    Raises:
        SystemExit: it did not listen within 60 s.
    """
    import yaml

    tests = REPO / "plugins" / "scheduler-k8s" / "tests"
    from tx_scheduler_k8s.testing import ADMIN_TOKEN, kubeconfig

    port = free_ports(1)
    log = base / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, str(tests / "fakekube" / "server.py"), "--port", str(port), "--workdir", str(base),
             "--schemas", str(tests / "data" / "schemas"), "--token", f"admin={ADMIN_TOKEN}", "--nodes", "1",
             "--node-cpu", "8", "--node-memory", "8Gi"], stdout=out, stderr=out)
    deadline = time.monotonic() + 60
    while "PORT " not in log.read_text(errors="replace"):
        if time.monotonic() > deadline or server.poll() is not None:
            server.terminate()
            raise SystemExit(f"fakekube did not start: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)
    (base / "kubeconfig").write_text(yaml.safe_dump(kubeconfig(f"http://127.0.0.1:{port}")))
    os.environ["KUBECONFIG"] = str(base / "kubeconfig")
    return server, port


def replace_section(out: Path, section: str, text: str) -> None:
    """Replace the section of ``out`` that starts with the line ``section`` (up to the next
    ``## `` heading) with ``text``, the rest of the file byte for byte; append it where the
    file has no such section."""
    old = out.read_text()
    if section in old:
        start = old.index(section)
        nxt = old.find("\n## ", start + 1)
        new = old[:start] + text.rstrip() + "\n" + (old[nxt:] if nxt > 0 else "")
    else:
        new = old.rstrip() + "\n\n" + text
    out.write_text(new)


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
