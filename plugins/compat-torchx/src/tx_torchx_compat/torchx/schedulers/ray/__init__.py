"""``torchx.schedulers.ray``: TorchX 0.7.0's Ray helper package (:mod:`.ray_common`)."""
