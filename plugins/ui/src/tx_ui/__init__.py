"""tx-ui: the ``tx ui`` command, one local web page for every app on every scheduler.

``import tx_ui`` imports no web framework: :mod:`tx_ui.server` (Starlette, uvicorn,
Jinja2) is imported when ``tx ui`` runs.
"""
from tx_ui.version import __version__

__all__ = ["__version__"]
