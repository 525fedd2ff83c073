"""tx.runner: submit apps and components, then follow them by app handle."""
from tx.runner.api import DEFAULT_SESSION, Runner, get_runner

__all__ = ["DEFAULT_SESSION", "Runner", "get_runner"]
