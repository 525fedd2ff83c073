"""tx.schedulers: the Scheduler base class, its responses and the scheduler registry.

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
    "infra_retries": "tx.schedulers.api",
    "ListAppResponse": "tx.schedulers.api",
    "Scheduler": "tx.schedulers.api",
    "PartialListError": "tx.schedulers.api",
    "SchedulerError": "tx.schedulers.api",
    "get_default_scheduler_name": "tx.schedulers.api",
    "get_scheduler_factories": "tx.schedulers.api",
    "Stream": "tx.schedulers.streams",
    "filter_regex": "tx.schedulers.streams",
    "line_blocks": "tx.schedulers.streams",
    "split_lines": "tx.schedulers.streams",
    "split_lines_iterator": "tx.schedulers.streams",
}

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'tx.schedulers' has no attribute {name!r}")
    import importlib  # deferred: the package face loads a name on first access

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> Any:
    return sorted(list(globals()) + list(_NAMES))
