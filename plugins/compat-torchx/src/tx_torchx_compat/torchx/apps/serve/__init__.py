"""``torchx.apps.serve``."""
