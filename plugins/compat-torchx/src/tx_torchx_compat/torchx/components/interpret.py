"""``torchx.components.interpret``: TorchX 0.7.0's page on model interpretability, which has
no components (interpretability depends on the model: write your own component, for
example around Captum, and run it as any other)."""

__all__: list = []
