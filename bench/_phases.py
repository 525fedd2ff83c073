"""Where `tx run -s local_cwd utils.echo --msg hi` spends its time, phase by phase, in one
fresh interpreter: ``python bench/_phases.py OUT.json`` runs the command in-process (as the
console script does: ``tx.cli.main._main``) and writes, for each phase, the CPU seconds of
this process (``time.process_time``: user + system, children excluded) and the wall seconds
at its end, plus what does not depend on the machine's load: the modules imported and the
attrs classes built.

bench/run.py runs it n times on the tx side and renders the medians under "Measured
reasons" in RESULTS.md. Not a bench of its own; standard library + tx only. The phases are
found by wrapping functions of ``tx.cli.cmd_run`` and ``tx.runner.Runner``; one that no
longer exists is left out (its time falls into the next phase), never an error.
``TX_PHASES_MODULES=1`` also prints, on stderr, the modules each phase imported.
"""
from __future__ import annotations

import time

_T0 = time.process_time()  # the interpreter's own start-up (site, .pth files) is before this
_W0 = time.perf_counter()

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from typing import Any, Callable, List, Tuple  # noqa: E402

_MODS0 = len(sys.modules)
_SEEN = set(sys.modules)
MARKS: List[Tuple[str, float, float, int]] = [("interpreter start-up (to the first line)", _T0, 0.0, _MODS0)]
CLASSES: List[str] = []


def mark(name: str) -> None:
    MARKS.append((name, time.process_time(), time.perf_counter() - _W0, len(sys.modules)))
    if os.environ.get("TX_PHASES_MODULES"):
        global _SEEN
        new = sorted(set(sys.modules) - _SEEN)
        _SEEN = set(sys.modules)
        print(name, new, file=sys.stderr)


def _count_attrs_classes() -> None:
    """Count the attrs classes built from now on (attrs' private builder; skipped if it moved)."""
    try:
        from attr import _make
    except ImportError:
        return
    builder = getattr(_make, "_ClassBuilder", None)
    orig = getattr(builder, "build_class", None)
    if orig is None:
        return

    def build_class(self: Any) -> Any:
        cls = orig(self)
        CLASSES.append(f"{cls.__module__}.{cls.__qualname__}")
        return cls

    builder.build_class = build_class  # type: ignore[union-attr]


def _wrap(owner: Any, name: str, label: str) -> None:
    f: Callable[..., Any] = getattr(owner, name, None)  # type: ignore[assignment]
    if f is None:
        return

    def wrapper(*a: Any, **k: Any) -> Any:
        mark("(between phases)")
        try:
            return f(*a, **k)
        finally:
            mark(label)

    setattr(owner, name, wrapper)


def main() -> None:
    out = sys.argv[1]
    argv = sys.argv[2:] or ["run", "-s", "local_cwd", "utils.echo", "--msg", "hi"]
    import attr  # noqa: F401  (counted in the phase below; needed to count its classes)

    mark("import attrs")
    _count_attrs_classes()
    import tx.cli.main as cli_main

    mark("import tx.cli.main (argparse, typing)")
    import tx.cli.cmd_run as cmd_run

    mark("import tx.cli.cmd_run (tx.specs: the model's attrs classes)")
    import tx.runner

    mark("import tx.runner (engine, plugin registry, pluggy)")
    _wrap(cmd_run, "make_runner", "make the runner (.txconfig)")
    _wrap(cmd_run, "_parse_cfg", "load the scheduler plugin (entry points, tx_scheduler_local) + -cfg")
    _wrap(cmd_run, "_load_app", "find and call the component (utils.echo)")
    _wrap(cmd_run, "_fallback", "settings: fallback chain")
    _wrap(tx.runner.Runner, "dryrun", "dryrun (AppDef -> request)")
    _wrap(tx.runner.Runner, "schedule", "submit: start the supervisor (fork + handshake)")
    _wrap(cmd_run, "_wait", "wait: relay the logs to their end, final status")
    _wrap(cmd_run, "auto_gc", "auto gc + archive copier start")
    rc = cli_main._main(argv)
    mark("the rest (summary line, return)")
    merged: dict = {}  # phase -> [cpu s, wall s, modules imported]
    for (_, c0, w0, m0), (name, c1, w1, m1) in zip(MARKS, MARKS[1:]):
        if name == "(between phases)":
            name = "argparse, settings, between phases"
        a = merged.setdefault(name, [0.0, 0.0, 0])
        a[0] += c1 - c0
        a[1] += w1 - w0
        a[2] += m1 - m0
    with open(out, "w") as f:
        json.dump({"rc": rc, "interpreter_cpu_s": _T0,
                   "phases": [[k, *v] for k, v in merged.items()],
                   "cpu_s": time.process_time(), "wall_s": time.perf_counter() - _W0,
                   "modules": len(sys.modules) - _MODS0, "attrs_classes": len(CLASSES),
                   "tx_attrs_classes": sum(c.startswith("tx") for c in CLASSES)}, f)
    sys.stdout.flush()
    os._exit(0)  # as the console script (tx.cli.main._exit_fast): no interpreter teardown


if __name__ == "__main__":
    main()
