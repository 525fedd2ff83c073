"""``torchx.tracker.backend``: TorchX 0.7.0's tracker backends (``fsspec``)."""
