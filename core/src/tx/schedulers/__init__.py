"""tx.schedulers: the Scheduler base class, its responses and the scheduler registry.

The face scheduler plugins import from (docs/api.md): the base class and its responses,
the registry, log streams, the replica environment contract (``env``, the module
:mod:`tx.schedulers.env`, and its most used names), and the helpers the backends share:
app ids, why an app failed, what a job saved, batch systems behind a command line, call
budgets, the status plane, sweep tables and list pages.

The names below are imported on first access, so that the small modules of this package
(:mod:`tx.schedulers.env`, the replica environment contract; :mod:`tx.schedulers.ids`)
can be imported by a replica's supervisor without attrs or the specs.
"""
from typing import Any

_NAMES = {
    "DEFAULT_INFRA_RETRIES": "tx.schedulers.api",
    "DescribeAppResponse": "tx.schedulers.api",
    "INFRA_RETRIES": "tx.schedulers.api",
    "add_infra_retries_opt": "tx.schedulers.api",
    "add_subclass_adapter": "tx.schedulers.api",
    "infra_retries": "tx.schedulers.api",
    "ListAppResponse": "tx.schedulers.api",
    "Scheduler": "tx.schedulers.api",
    "PartialListError": "tx.schedulers.api",
    "SchedulerError": "tx.schedulers.api",
    "get_default_scheduler_name": "tx.schedulers.api",
    "get_scheduler_factories": "tx.schedulers.api",
    "Stream": "tx.schedulers.streams",
    "filter_regex": "tx.schedulers.streams",
    "follow_file": "tx.schedulers.streams",
    "line_blocks": "tx.schedulers.streams",
    "split_lines": "tx.schedulers.streams",
    "split_lines_iterator": "tx.schedulers.streams",
    # the replica environment contract (:mod:`tx.schedulers.env`)
    "APP_ID": "tx.schedulers.env",
    "RANK0_HOST": "tx.schedulers.env",
    "REPLICA_ID": "tx.schedulers.env",
    "ROLE_NAME": "tx.schedulers.env",
    "replica_env": "tx.schedulers.env",
    # app ids (:mod:`tx.schedulers.ids`)
    "clean_name": "tx.schedulers.ids",
    "get_len_random_id": "tx.schedulers.ids",
    "make_unique": "tx.schedulers.ids",
    # why an app failed (:mod:`tx.schedulers.why`)
    "LATE_CAUSE_S": "tx.schedulers.why",
    "ONE_FAILURE_S": "tx.schedulers.why",
    "PEER_LOST": "tx.schedulers.why",
    "failure_once": "tx.schedulers.why",
    "first_cause": "tx.schedulers.why",
    "lost_peer": "tx.schedulers.why",
    "names_cause": "tx.schedulers.why",
    "parse_failures": "tx.schedulers.why",
    "parse_report": "tx.schedulers.why",
    "root_cause": "tx.schedulers.why",
    "signal_text": "tx.schedulers.why",
    "telling_line": "tx.schedulers.why",
    # what a job saved (:mod:`tx.schedulers.saves`)
    "local_path": "tx.schedulers.saves",
    "what_saved": "tx.schedulers.saves",
    # backends behind a command line (:mod:`tx.schedulers.batch`)
    "failure_line": "tx.schedulers.batch",
    "read_tail": "tx.schedulers.batch",
    "read_text": "tx.schedulers.batch",
    "run_program": "tx.schedulers.batch",
    "timeout_from_env": "tx.schedulers.batch",
    "validate_host_app": "tx.schedulers.batch",
    "write_atomic": "tx.schedulers.batch",
    # calls a backend allows (:mod:`tx.schedulers.budget`)
    "BackendThrottled": "tx.schedulers.budget",
    "CallBudget": "tx.schedulers.budget",
    "ThrottledError": "tx.schedulers.budget",
    "budget_for": "tx.schedulers.budget",
    "plane_dir": "tx.schedulers.budget",
    # one look at many apps (:mod:`tx.schedulers.plane`)
    "StatusPlane": "tx.schedulers.plane",
    "look_since": "tx.schedulers.plane",
    "one_look": "tx.schedulers.plane",
    # a sweep's trials as one array job (:mod:`tx.schedulers.sweep_table`)
    "SweepTable": "tx.schedulers.sweep_table",
    "compact": "tx.schedulers.sweep_table",
    "sh_statements": "tx.schedulers.sweep_table",
    "split_words": "tx.schedulers.sweep_table",
    "table_text": "tx.schedulers.sweep_table",
    "trial_table": "tx.schedulers.sweep_table",
    # a page of a list (:mod:`tx.schedulers.paging`)
    "ListPage": "tx.schedulers.paging",
    # a batch system's command-line client, named for what it is on this face
    "BatchClient": "tx.schedulers.batch:Client",
}

#: modules this face exports as namespaces: ``env`` is the replica environment contract
#: (``env.APP_ID``, ``env.replica_env(...)``), which a scheduler plugin reads by its names
_MODULES = ("env",)

__all__ = sorted([*_NAMES, *_MODULES])


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None and name not in _MODULES:
        raise AttributeError(f"module 'tx.schedulers' has no attribute {name!r}")
    import importlib  # deferred: the package face loads a name on first access

    if module is None:
        return importlib.import_module(f"{__name__}.{name}")
    module, _, attr = module.partition(":")
    value = getattr(importlib.import_module(module), attr or name)
    globals()[name] = value
    return value


def __dir__() -> Any:
    return sorted(set(globals()) | set(_NAMES) | set(_MODULES))
