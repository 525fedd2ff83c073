"""``torchx.components.train``: TorchX 0.7.0's page on training, which has no components of
its own (train with ``dist.ddp``/``dist.spmd`` for distributed jobs, or ``utils.python`` for
one process)."""

__all__: list = []
