"""``torchx.test``: the test helpers TorchX 0.7.0 ships in its package."""
