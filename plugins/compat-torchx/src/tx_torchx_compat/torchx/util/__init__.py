"""``torchx.util``: the helpers TorchX code imports (``torchx.util.types``)."""
