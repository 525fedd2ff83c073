"""Registrations of tx-ui (entry point ``ui`` in the group ``tx``). Imports nothing heavy:
the command's record is imported when ``tx ui`` runs, the web stack when it serves."""
from typing import Callable

from tx import hookimpl

TX_PLUGIN_API = 1


@hookimpl
def tx_register_commands(register: Callable[..., None]) -> None:
    """Register the ``tx ui`` command (:data:`tx_ui.command.COMMAND`)."""
    register("ui", "tx_ui.command:COMMAND",
             help="serve a local web page of every app, with live logs, why it failed and cancel")
