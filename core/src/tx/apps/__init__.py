"""Small programs the built-in components launch, each run as ``python -m tx.apps.<name>``:

* :mod:`tx.apps.copy_main`: copy one file between fsspec URLs (``utils.copy``);
* :mod:`tx.apps.booth_main`: evaluate the Booth function, write the result (``utils.booth``);
* :mod:`tx.apps.process_monitor`: run a command until a timeout or a file appears
  (``metrics.tensorboard``);
* :mod:`tx.apps.serve`: register a model with TorchServe (``serve.torchserve``).

They are programs, not library code: they print progress to stdout and exit with a status.
"""

__all__ = []
