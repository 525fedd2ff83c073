"""docs/portability.md: the matrix's backends, apps and aspects, and the document
tests/test_portability.py renders from what it measured, reads back, and checks against
tests/portability_explained.json (the explanations of every cell that differs from the
reference, ``local_cwd``). Kept apart from the test module so that each reads in one sitting."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import attrs

import pytest

from tx.specs import AppDef

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "portability.md"
EXPLAINED = Path(__file__).with_name("portability_explained.json")
UPDATE = os.environ.get("TX_UPDATE_PORTABILITY") == "1"
REFERENCE = "local_cwd"
BACKENDS = ("local_cwd", "local_dir", "local_docker", "slurm", "lsf", "ray", "aws_batch", "kubernetes",
            "kubernetes_jobset", "kubernetes_mcad", "gcp_batch")
APPS = ("ddp", "ddp_fail", "logs", "retry", "cancel", "signal")
ASPECTS = ("state", "why failed", "logs", "describe", "list")
#: per backend: cancel and the capacity it gives back
BACKEND_ASPECTS = ("cancel", "capacity back")
#: what ran each column: (kind, what exactly); a kind other than "real" marks its cells as
#: confirmed by no real cluster
REAL, EMULATOR, TEST_SERVER = "real", "emulator", "tx's own test server"
BACKEND_KINDS: Dict[str, Tuple[str, str]] = {
    "local_cwd": (REAL, "local processes (tx's supervisor)"),
    "local_dir": (REAL, "local processes (tx's supervisor)"),
    "local_docker": (REAL, "podman's Docker-compatible API (a private engine)"),
    "slurm": (REAL, "Slurm from Debian's packages (a private slurmctld with slurmd nodes)"),
    "lsf": (REAL, "OpenLava 4, an LSF-compatible batch system built from source (a private one-host cluster)"),
    "ray": (REAL, "a private Ray head (pinned ray[default])"),
    "aws_batch": (EMULATOR, "moto's Batch and CloudWatch Logs in Docker mode over the podman engine, with the "
                  "node variables, node jobs and node log streams AWS documents added by tx's test launcher"),
    "kubernetes": (TEST_SERVER, "fakekube: an API server that validates Volcano Jobs against their CRD "
                   "schema and runs pods as local processes"),
    "kubernetes_jobset": (TEST_SERVER, "fakekube with the JobSet and Kueue CRDs"),
    "kubernetes_mcad": (TEST_SERVER, "fakekube with the MCAD AppWrapper CRD"),
    "gcp_batch": (TEST_SERVER, "fake_gcp: the Batch v1 and Cloud Logging REST APIs, tasks run as local processes"),
}
#: the mark on a cell measured against an emulator or tx's own test server
UNCONFIRMED = " †"
APP_TITLES = {
    "ddp": "2-replica gloo DDP (examples/train.py, 1 epoch, no per-epoch checkpoint)",
    "ddp_fail": "DDP whose rank 1 raises",
    "logs": "two roles x two replicas writing to stdout and stderr",
    "retry": "a role that fails once, then succeeds (max_retries=1)",
    "cancel": "cancelled while running",
    "signal": "a replica killed by SIGKILL",
}


# -- the categories a cell holds ---------------------------------------------------------------
def _said(text: Optional[str]) -> bool:
    return bool(text and text.strip() and text != "<NONE>")


def why_category(app: str, desc: Any) -> str:
    """What ``structured_error_msg`` says, as a category."""
    msg = desc.structured_error_msg if _said(desc.structured_error_msg) else ""
    if not msg:
        return "none"
    if app == "ddp_fail":
        if "RuntimeError" in msg and "matrix rank 1 fails on purpose" in msg:
            return "names rank 1's exception" if re.search(r"rank 1\b", msg) else "names the exception"
        if "=====" in msg:
            return "torchrun's banner"
        if re.search(r"exit(ed)? (with )?code|exit status", msg):
            return "exit code only"
        return "other text"
    if app == "signal":
        if "SIGKILL" in msg or re.search(r"signal 9\b", msg):
            return "names SIGKILL"
        if "137" in msg:
            return "exit code 137"
        if re.search(r"code -9\b", msg):
            return "exit code -9"
        return "other text"
    if app == "cancel":
        return "says cancelled" if "cancel" in msg.lower() else "other text"
    return "a message"


def describe_category(submitted: AppDef, desc: Any) -> str:
    """Whether ``describe`` gives the whole AppDef back; else which fields differ."""
    back = getattr(desc, "app", None)
    if back is None:
        return "no AppDef (roles only)" if desc.roles else "no AppDef"
    a, b = attrs.asdict(submitted, recurse=True), attrs.asdict(back, recurse=True)
    diff: List[str] = []

    def walk(x: Any, y: Any, path: str) -> None:
        if isinstance(x, dict) and isinstance(y, dict):
            for key in sorted(set(x) | set(y), key=str):
                walk(x.get(key), y.get(key), f"{path}.{key}" if path else str(key))
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for i, (p, q) in enumerate(zip(x, y)):
                walk(p, q, f"{path}[]")
        elif x != y:
            diff.append(path)

    walk(a, b, "")
    diff = sorted(set(re.sub(r"^roles\[\]\.(env|metadata)\..*$", r"roles[].\1", d) for d in diff))
    return "whole AppDef" if not diff else "differs: " + ", ".join(diff)


# -- the document ----------------------------------------------------------------------------------
HEADER = """\
# Portability matrix

<!-- Generated by tests/test_portability.py from what the run measured; do not edit by hand.
Regenerate (every backend that can run here; a run of some backends, -k NAME, rewrites their rows):
    TX_UPDATE_PORTABILITY=1 hatch run test:all tests/test_portability.py
Differences from local_cwd are explained in tests/portability_explained.json. -->

One set of apps, run unchanged by `tests/test_portability.py` on every scheduler that can run
on the test machine, and what tx says about each, the apps run, waited for and read as users
do (`Runner.run`, `Runner.wait` as `tx run` waits, logs as `tx log` prints them, tx's log
archive included). Every cell is a category, not a timing; a cell that differs from the
reference (`local_cwd`) is marked with `*` and explained below, and a cell measured against
an emulator or tx's own test server rather than the real backend is marked with `†`.
Regenerate with `TX_UPDATE_PORTABILITY=1 hatch run test:all tests/test_portability.py`: the
test fails where what it measured differs from this page, or where a difference has no
explanation (it then lists them; write each in tests/portability_explained.json and run it
again). Regenerating drops the explanations of cells that no longer differ.

What differs between backends is only where the program comes from (the image; for
containers, this interpreter mounted read-only at its own path) and where the retried role
keeps its marker: a place that replica can see on that backend (a declared bind mount or
hostPath volume, the file system that local processes, Slurm's nodes and the one-node Ray
head share) or the backend's own attempt counter (GCP Batch's BATCH_TASK_RETRY_ATTEMPT).
"""


def render(rows: Dict[str, Dict[str, Dict[str, str]]], explained: Dict[str, Any]) -> str:
    """The document for ``rows`` ({backend: {app or "backend": {aspect: cell}}})."""
    ref = rows.get(REFERENCE, {})
    notes: List[str] = []
    out = [HEADER]

    def cell(b: str, group: str, aspect: str) -> str:
        v = rows.get(b, {}).get(group, {}).get(aspect, "not measured")
        mark = "" if b == REFERENCE or v in ("not measured", ref.get(group, {}).get(aspect)) else " *"
        if BACKEND_KINDS[b][0] != REAL and v != "not measured":
            mark += UNCONFIRMED
        return v.replace("|", "\\|") + mark

    out.append("\n## What ran each column\n")
    out.append("Cells of a column that did not run on the real backend are marked †: what they say was "
               "measured against an emulator or tx's own test server, and no real cluster has confirmed it.\n")
    out.append("| backend | ran on | kind |")
    out.append("|---|---|---|")
    for b in BACKENDS:
        kind, what = BACKEND_KINDS[b]
        out.append(f"| {b} | {what} | {kind} |")

    for app in APPS:
        out.append(f"\n## {app}: {APP_TITLES[app]}\n")
        out.append("| backend | " + " | ".join(ASPECTS) + " |")
        out.append("|---" * (len(ASPECTS) + 1) + "|")
        for b in BACKENDS:
            out.append(f"| {b} | " + " | ".join(cell(b, app, asp) for asp in ASPECTS) + " |")
    out.append("\n## Cancel, and what each backend gives back\n")
    out.append("After every app above ended or was cancelled, the backend's free capacity is compared with "
               "what it was before they started (local: replica processes; podman: running containers; Slurm: "
               "node states and queue; Ray: CPUs in use, placement groups, live actors; Kubernetes: pods not "
               "ended; GCP Batch: task processes).\n")
    out.append("| backend | " + " | ".join(BACKEND_ASPECTS) + " |")
    out.append("|---" * (len(BACKEND_ASPECTS) + 1) + "|")
    for b in BACKENDS:
        out.append(f"| {b} | " + " | ".join(cell(b, "backend", asp) for asp in BACKEND_ASPECTS) + " |")
    out.append("\n## Why the cells marked * differ\n")
    for b in BACKENDS:
        for app, why in sorted(explained.get("not_run", {}).get(b, {}).items()):
            notes.append(f"- **{b}, {app}**: not run here: {why}")
        for group, aspects in sorted(explained.get("differences", {}).get(b, {}).items()):
            for aspect, e in sorted(aspects.items()):
                notes.append(f"- **{b}, {group}, {aspect}** (`{e['cell']}`): {e['why']}")
    out.extend(notes or ["(none)"])
    return "\n".join(out) + "\n"


def parse(text: str) -> Dict[str, Dict[str, Dict[str, str]]]:
    """The rows of a document :func:`render` wrote."""
    rows: Dict[str, Dict[str, Dict[str, str]]] = {}
    group, aspects = None, ASPECTS
    for line in text.splitlines():
        m = re.match(r"## (\w+): ", line)
        if m and m.group(1) in APPS:
            group, aspects = m.group(1), ASPECTS
        elif line.startswith("## Cancel"):
            group, aspects = "backend", BACKEND_ASPECTS
        elif line.startswith("## "):
            group = None
        elif group and line.startswith("| ") and not line.startswith("| backend"):
            parts = [p.strip() for p in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            b, vals = parts[0], [re.sub(r"( \*)?( †)?$", "", v).replace("\\|", "|") for v in parts[1:]]
            got = {k: v for k, v in zip(aspects, vals) if v != "not measured"}
            if b in BACKENDS and len(vals) == len(aspects) and got:
                rows.setdefault(b, {})[group] = got
    return rows


def load_explained() -> Dict[str, Any]:
    return json.loads(EXPLAINED.read_text())


def check_and_record(name: str, measured: Dict[str, Dict[str, str]]) -> None:
    """Compare ``name``'s measured rows with docs/portability.md and the explanations; with
    TX_UPDATE_PORTABILITY=1 write them (and drop explanations no longer needed) instead.
    Each column reads, changes and writes the page under an exclusive lock on it: under
    pytest-xdist two workers record their columns at once."""
    import fcntl

    with open(DOC, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _check_and_record(name, measured)


def _check_and_record(name: str, measured: Dict[str, Dict[str, str]]) -> None:
    explained = load_explained()
    old = DOC.read_text() if DOC.exists() else ""
    rows = parse(old)
    rows[name] = measured
    ref = rows.get(REFERENCE, {})
    diffs = explained.setdefault("differences", {})
    mine = diffs.get(name, {})
    unexplained, stale = [], []
    not_run = explained.get("not_run", {}).get(name, {})
    for group, aspects in measured.items():
        if group in not_run:
            continue
        for aspect, v in aspects.items():
            e = mine.get(group, {}).get(aspect)
            differs = name != REFERENCE and v != ref.get(group, {}).get(aspect)
            if differs and (e is None or e.get("cell") != v):
                unexplained.append(f"{name}, {group}, {aspect}: {v!r} (local_cwd: {ref.get(group, {}).get(aspect)!r})")
            elif not differs and e is not None:
                stale.append((group, aspect))
    if UPDATE:
        for group, aspect in stale:
            del mine[group][aspect]
            if not mine[group]:
                del mine[group]
        if name in diffs and not diffs[name]:
            del diffs[name]
        EXPLAINED.write_text(json.dumps(explained, indent=2, sort_keys=True) + "\n")
        DOC.write_text(render(rows, explained))
    else:
        assert not unexplained, ("cells that differ from local_cwd without an explanation in "
                                 f"{EXPLAINED.name} ('differences'):\n" + "\n".join(unexplained))
        new = render(rows, explained)
        if new != old:
            changed = [f"{name}, {g}, {a}: doc {parse(old).get(name, {}).get(g, {}).get(a)!r}, measured {v!r}"
                       for g, asp in measured.items() for a, v in asp.items()
                       if parse(old).get(name, {}).get(g, {}).get(a) != v]
            pytest.fail("docs/portability.md differs from what this run measured (regenerate with "
                        "TX_UPDATE_PORTABILITY=1 hatch run test:all tests/test_portability.py):\n" + "\n".join(changed or ["(text)"]),
                        pytrace=False)
        assert not stale, f"explanations for cells that no longer differ: {stale} (TX_UPDATE_PORTABILITY=1 drops them)"
    assert not unexplained, ("cells that differ from local_cwd without an explanation in "
                             f"{EXPLAINED.name} ('differences'):\n" + "\n".join(unexplained))
