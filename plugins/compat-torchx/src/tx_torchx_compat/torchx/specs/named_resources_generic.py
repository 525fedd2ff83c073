"""``torchx.specs.named_resources_generic``: the generic named resources (``gpu.small`` ...);
``NAMED_RESOURCES`` maps each name to its factory (a function returning a new
``Resource``), as in TorchX 0.7.0."""
import functools

from tx.specs.named_resources import GENERIC, GiB, named_resources  # noqa: F401
from tx.specs.api import Resource  # noqa: F401,E402

NAMED_RESOURCES = {name: functools.partial(named_resources.__getitem__, name) for name in GENERIC}
