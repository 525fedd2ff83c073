"""The tx plugin contract.

A plugin is a distribution with an entry point in the group ``tx`` naming a small module
(by convention ``<package>/hooks.py``) of :data:`hookimpl` functions. Every
``tx_register_*`` hook receives a ``register`` callback; the core owns the registries, so
it can keep factories lazy (dotted paths imported on first use), record which distribution
registered each name, and refuse two plugins that claim one name. See ``docs/hooks.md``.

All ``tx_register_*`` hooks are called once per process, the first time a registry is
needed; every implementation is called (results are not collected: registration happens
through ``register``). ``tx_on_event`` is called for every runner lifecycle event.
"""
from __future__ import annotations

from typing import Callable

import pluggy

from tx.hooknames import EVENT_HOOK, HOOK_NAMES, REGISTER_HOOKS

__all__ = [
    "EVENT_HOOK", "HOOK_NAMES", "PROJECT", "REGISTER_HOOKS", "hookimpl", "hookspec",
    "tx_on_event", "tx_register_commands", "tx_register_components", "tx_register_named_resources",
    "tx_register_schedulers", "tx_register_trackers", "tx_register_workspaces",
]

PROJECT = "tx"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def tx_register_schedulers(register: Callable[..., None]) -> None:
    """Register schedulers.

    Call ``register(name, factory, *, description="")`` once per scheduler, where
    ``name`` is the scheduler name used in ``-s NAME`` and in app handles
    (``NAME://session/app_id``) and ``factory`` is a dotted path ``"pkg.module:function"``
    (preferred: imported only when the scheduler is used) or a callable. The factory is
    called as ``factory(session_name: str, **scheduler_params) -> tx.schedulers.Scheduler``.
    """


@hookspec
def tx_register_workspaces(register: Callable[..., None]) -> None:
    """Register workspace kinds.

    Call ``register(kind, factory, *, description="", install="")`` where ``factory`` is a
    dotted path (or callable) to a zero-argument callable, usually a class, returning a
    :class:`tx.workspace.Workspace` (``run_opts()`` and ``build(role, workspace, cfg) ->
    Role``). A scheduler uses a kind by naming it in ``Scheduler.workspace_kind``; the
    Runner finds it here, so schedulers never import the plugin that implements it.
    """


@hookspec
def tx_register_named_resources(register: Callable[..., None]) -> None:
    """Register named resources (``-h NAME`` in components).

    Call ``register(name, factory)`` where ``factory`` is a zero-argument callable (or a
    dotted path to one) returning a fresh :class:`tx.specs.Resource` each call.
    """


@hookspec
def tx_register_trackers(register: Callable[..., None]) -> None:
    """Register experiment trackers.

    Call ``register(name, factory, *, description="", requires=(), install="")`` where
    ``factory`` (dotted path or callable) is called as
    ``factory(config: Optional[str]) -> tx.tracker.TrackerBase``; ``config`` is the
    tracker's config string (``[tracker:NAME] config`` in ``.txconfig``, or
    ``TX_TRACKER_<NAME>_CONFIG``) or None. tx-core registers ``file``
    (:mod:`tx.tracker.backend.fsspec`). Jobs use the trackers ``[tx:tracker]`` or
    ``TX_TRACKERS`` name (:func:`tx.tracker.get_configured_trackers`).
    """


@hookspec
def tx_register_components(register: Callable[..., None]) -> None:
    """Register component namespaces.

    Call ``register(namespace, module)`` where ``module`` is a dotted module path; every
    component function in it (and its submodules) becomes ``namespace.<submodule>.<fn>``.
    An empty namespace puts the components at top level (as the built-ins are).
    """


@hookspec
def tx_register_commands(register: Callable[..., None]) -> None:
    """Register extra ``tx`` subcommands.

    Call ``register(name, command, *, help="")`` where ``name`` is the subcommand
    (``tx NAME``), ``help`` its one-line help, and ``command`` a dotted path (preferred:
    imported only when the command runs) to a :class:`tx.cli.command.Command`, the record
    of its arguments and of ``run(args: argparse.Namespace) -> int | None``::

        COMMAND = Command(run=_quota, arguments=(Argument("--who", required=True),))
        register("quota", "acme_tx.cli:COMMAND", help="show the team's GPU quota")

    ``command`` may also be (the dotted path of) a class or an object with
    ``add_arguments(parser: argparse.ArgumentParser) -> None`` and
    ``run(args: argparse.Namespace) -> int | None``, the older form. A plugin cannot
    replace one of tx's own commands.
    """


@hookspec
def tx_on_event(event: "tx.runner.events.TxEvent") -> None:  # noqa: F821 - the runner is above
    """Called for every runner lifecycle event (run, schedule, status, cancel, ...).

    ``event`` is a :class:`tx.runner.events.TxEvent`. Every implementation is called;
    an exception raised by one is logged and does not affect the runner.
    """

