"""The base class of the errors users cause.

Every exception whose message is written for users (an unknown scheduler, a bad run
option, a malformed app handle, a backend that refused a request, a workspace that cannot
be built, a plugin that cannot load) derives from :class:`UserError`. The CLI prints such
an error as one line and exits non-zero; any other exception is unexpected: it is printed
with its type and a hint, and its traceback with ``--log_level DEBUG``. Plugins raise
``UserError`` subclasses (usually :class:`tx.schedulers.SchedulerError`) for conditions a
user can fix.
"""

__all__ = ["UserError"]


class UserError(Exception):
    """An error the user can act on; ``str(e)`` is one line written for them."""
