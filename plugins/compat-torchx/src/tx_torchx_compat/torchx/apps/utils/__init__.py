"""``torchx.apps.utils``."""
