"""``torchx.components``: tx's built-in components (``dist.ddp``, ``utils.echo`` ...)."""
from tx.components import *  # noqa: F401,F403
