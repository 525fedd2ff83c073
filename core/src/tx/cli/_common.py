"""Pieces shared by the CLI commands."""
from __future__ import annotations

from typing import Any, Optional


def make_runner(with_component_defaults: bool = False) -> Any:
    """A Runner; with the ``[component:*]`` defaults of ``.txconfig`` when asked."""
    from tx.runner.api import Runner

    defaults = None
    if with_component_defaults:
        from tx.runner import config

        defaults = config.load_sections("component")
    return Runner(component_defaults=defaults)


def config_default(command: str, key: str) -> Optional[str]:
    """``[cli:<command>] <key>`` from ``.txconfig``, or None."""
    from tx.runner import config

    return config.get_config("cli", command, key)


def default_scheduler(runner: Any) -> str:
    """The scheduler to use when ``-s`` is not given: ``[cli:run] scheduler``, else
    ``local_cwd`` if installed, else the first installed one.

    Raises:
        CLIError: no scheduler is installed.
    """
    from tx.cli.errors import CLIError
    from tx.plugins import install_hint

    name = config_default("run", "scheduler")
    if name:
        return name
    from tx.schedulers.api import get_default_scheduler_name

    name = get_default_scheduler_name(runner.scheduler_backends())
    if name is None:
        raise CLIError(install_hint())
    return name


def is_local(runner: Any, scheduler: str) -> bool:
    """Schedulers whose replicas run on this host wait and relay logs by default, as
    TorchX's local schedulers do (``Scheduler.runs_on_host``)."""
    return runner.scheduler_runs_on_host(scheduler)
