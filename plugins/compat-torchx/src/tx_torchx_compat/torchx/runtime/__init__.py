"""``torchx.runtime``: what TorchX apps use at run time (:mod:`torchx.runtime.tracking`)."""
