"""Find the script a ``torchrun`` or ``python`` role would run, so that a missing file fails
``schedule`` with one line, before anything starts (``dist.ddp --script tain.py``) instead of starting replicas that
each fail a few seconds later.

Only arguments whose meaning is certain are checked: the first positional argument of
``torchrun`` (https://pytorch.org/docs/stable/elastic/run.html: ``torchrun [options]
TRAINING_SCRIPT [args]``; not with ``--module``/``-m`` or ``--no-python``) and of ``python``
(https://docs.python.org/3/using/cmdline.html: ``python [options] SCRIPT [args]``; not with
``-c`` or ``-m``), also inside ``bash -c "torchrun ..."`` (multi-node ``dist.ddp``). Paths
holding a macro or variable (``$``) are not checked.
"""
from __future__ import annotations

import os
import shlex
from typing import Any, List, Optional

from tx.specs import Role

#: torchrun options that take no value
_TORCHRUN_FLAGS = {"--standalone", "--run-path", "--run_path", "--virtual-local-rank", "--virtual_local_rank"}
#: torchrun options after which the positional argument is not a file
_TORCHRUN_NOT_A_FILE = {"-m", "--module", "--no-python", "--no_python"}
#: python options that take a value (the others are flags)
_PYTHON_VALUED = {"-W", "-X", "--check-hash-based-pycs"}


def _torchrun_script(args: List[str]) -> Optional[str]:
    i = 0
    while i < len(args):
        a = args[i]
        if a in _TORCHRUN_NOT_A_FILE:
            return None
        if a == "--":
            return args[i + 1] if i + 1 < len(args) else None
        if a.startswith("-"):
            i += 1 if ("=" in a or a in _TORCHRUN_FLAGS) else 2
            continue
        return a
    return None


def _python_script(args: List[str]) -> Optional[str]:
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-c", "-m") or a.startswith(("-c", "-m")) and len(a) > 2 and not a.startswith("--"):
            return None
        if a == "-":
            return None
        if a.startswith("-"):
            i += 2 if a in _PYTHON_VALUED else 1
            continue
        return a
    return None


def script_of(entrypoint: str, args: List[str]) -> Optional[str]:
    """The script file ``entrypoint args`` runs, where that is certain; else None."""
    prog = os.path.basename(entrypoint)
    if prog == "torchrun":
        return _torchrun_script(args)
    if prog in ("python", "python3") or prog.startswith("python3."):
        return _python_script(args)
    if prog in ("bash", "sh") and len(args) == 2 and args[0] == "-c":
        try:
            words = shlex.split(args[1])
        except ValueError:
            return None
        if words and all(c not in args[1] for c in ";&|\n"):
            return script_of(words[0], words[1:])
    return None


def missing_script(role: Role, workdir: str) -> Optional[str]:
    """A one-line error if ``role`` runs a script that does not exist under ``workdir``
    (where its replicas start); None when it exists or cannot be known."""
    script = script_of(role.entrypoint, list(role.args))
    if not script or "$" in script:
        return None
    path = os.path.join(workdir, os.path.expanduser(script))
    if os.path.exists(path):
        return None
    return (f"role {role.name!r} runs {script!r}, which does not exist in {workdir} "
            "(a script path is relative to the directory the replicas start in)")


def check_scripts(app: Any, request: Any) -> None:
    """Raise ``ValueError`` (one line) if a role of ``app`` (an AppDef, or None) runs a
    script missing from the directory its replicas start in (``request.roles[i].cwd``).
    Called by ``schedule``, so ``--dryrun`` still prints the request."""
    if app is None:
        return
    cwds = {r.name: r.cwd for r in request.roles}
    for role in app.roles:
        cwd = cwds.get(role.name)
        err = missing_script(role, cwd) if cwd else None
        if err:
            raise ValueError(err)
