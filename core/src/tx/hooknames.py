"""The names of the plugin contract's hooks, in one table.

Standard library only, so that the plugin manager, its snapshot cache and the hook
specifications (:mod:`tx.hookspecs`, which imports pluggy) can all read it: it sits below
each of them and imports nothing of tx.
"""
from typing import Dict, Tuple

__all__ = ["EVENT_HOOK", "HOOK_NAMES", "KINDS", "REGISTER_HOOKS"]

#: registry kind -> the hook that fills it (specifications and documentation:
#: :mod:`tx.hookspecs`, ``docs/hooks.md``)
REGISTER_HOOKS: Dict[str, str] = {
    "schedulers": "tx_register_schedulers",
    "workspaces": "tx_register_workspaces",
    "named_resources": "tx_register_named_resources",
    "trackers": "tx_register_trackers",
    "components": "tx_register_components",
    "commands": "tx_register_commands",
}
#: the event hook, called for every runner lifecycle event
EVENT_HOOK: str = "tx_on_event"
#: every hook name: the registration hooks, then the event hook
HOOK_NAMES: Tuple[str, ...] = (*REGISTER_HOOKS.values(), EVENT_HOOK)
#: the registry kinds, in the order of :data:`REGISTER_HOOKS`
KINDS: Tuple[str, ...] = tuple(REGISTER_HOOKS)
