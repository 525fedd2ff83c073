"""tx.runner: submit apps and components, then follow them by app handle.

The face of the runner (docs/api.md): :class:`Runner` and :func:`get_runner`; handles parsed
by their syntax (:class:`AppRef`, :class:`RunRef`, :class:`SweepRef`, :class:`TrialRef`,
:func:`parse_handle`); what the CLI and ``tx ui`` both show of apps (:mod:`tx.views`:
``status_text``, ``why``, ``newest_first``, ``run_summary``, ...; :mod:`tx.durations`); and
the records of runs with failover and of sweeps on this host, each under a name that says
which (``list_runs``/``load_run``/``collapse_runs``, ``list_sweeps``/``load_sweep``/
``collapse_sweeps``). The names but the Runner's are loaded on first access: a Runner of an
AppDef never imports failover or sweeps.
"""
from tx.runner.api import DEFAULT_SESSION, Runner, get_runner

#: the names of this face loaded on first access: ``name: "module"`` or ``"module:attr"``
_LAZY = {
    # handles, parsed by syntax (tx.runner.handles)
    "AppRef": "tx.runner.handles",
    "RunRef": "tx.runner.handles",
    "SweepRef": "tx.runner.handles",
    "TrialRef": "tx.runner.handles",
    "new_run_id": "tx.runner.handles",
    "parse_handle": "tx.runner.handles:parse",
    # what the CLI and the UI both show (tx.views, tx.durations)
    "ACTIVE_STATES": "tx.views",
    "newest_first": "tx.views",
    "run_summary": "tx.views",
    "status_text": "tx.views",
    "submitted": "tx.views",
    "why": "tx.views",
    "format_age": "tx.durations",
    "format_duration": "tx.durations",
    # the records of runs with failover (tx.runner.failover)
    "RunRecord": "tx.runner._runs",
    "UnknownRunError": "tx.runner._runs",
    "collapse_runs": "tx.runner._runs:collapse_listed",
    "list_runs": "tx.runner._runs:list_records",
    "load_run": "tx.runner._runs:load_record",
    "run_record_path": "tx.runner._runs:record_path",
    # the records of sweeps (tx.runner.sweep)
    "UnknownSweepError": "tx.runner._sweep_records",
    "collapse_sweeps": "tx.runner.sweep:collapse_listed",
    "list_sweeps": "tx.runner._sweep_records:list_records",
    "load_sweep": "tx.runner._sweep_records:load_record",
}

__all__ = ["DEFAULT_SESSION", "Runner", "get_runner", *sorted(_LAZY)]


def __getattr__(name: str) -> object:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'tx.runner' has no attribute {name!r}")
    import importlib  # deferred: the face loads a name on first access

    module, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module), attr or name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(list(globals()) + list(_LAZY))
