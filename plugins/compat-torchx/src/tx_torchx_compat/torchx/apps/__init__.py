"""``torchx.apps``: tx's :mod:`tx.apps` at TorchX 0.7.0's paths (``torchx.apps.serve.serve``,
``torchx.apps.utils.booth_main``, ``.copy_main``, ``.process_monitor``)."""
