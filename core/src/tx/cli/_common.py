"""Pieces shared by the CLI commands.

The runner, the settings and the plugin registry are imported when a command runs, not
when this module is: every command module imports this one, and every command's parser is
built for ``tx completion`` and for a plugin's command.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from tx.cli.errors import CLIError

if TYPE_CHECKING:
    from tx.runner import Runner

__all__ = ["config_default", "default_scheduler", "is_local", "make_runner"]


def make_runner(with_component_defaults: bool = False) -> Runner:
    """A :class:`tx.runner.Runner`; with the ``[component:*]`` defaults of ``.txconfig``
    when asked."""
    # the runner and the settings are imported when a command runs (module docstring)
    from tx.runner import Runner
    from tx.config import load_sections

    return Runner(component_defaults=load_sections("component") if with_component_defaults else None)


def config_default(command: str, key: str) -> Optional[str]:
    """``[cli:<command>] <key>`` from ``.txconfig``, or None."""
    # the settings are imported when a command runs (see the module docstring)
    from tx.config import get_config

    return get_config("cli", command, key)


def default_scheduler(runner: Runner) -> str:
    """The scheduler to use when ``-s`` is not given: ``[cli:run] scheduler``, else
    ``local_cwd`` if installed, else the first installed one.

    Raises:
        CLIError: no scheduler is installed.
    """
    # the registry and the scheduler API are imported when a command runs (module docstring)
    from tx.plugins import install_hint
    from tx.schedulers.api import get_default_scheduler_name

    name = config_default("run", "scheduler")
    if name:
        return name
    name = get_default_scheduler_name(runner.scheduler_backends())
    if name is None:
        raise CLIError(install_hint())
    return name


def is_local(runner: Runner, scheduler: str) -> bool:
    """Schedulers whose replicas run on this host wait and relay logs by default, as
    TorchX's local schedulers do (``Scheduler.runs_on_host``)."""
    return runner.scheduler_runs_on_host(scheduler)
