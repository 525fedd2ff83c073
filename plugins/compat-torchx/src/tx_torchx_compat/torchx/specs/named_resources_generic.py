"""``torchx.specs.named_resources_generic``: the generic named resources (``gpu.small`` ...)."""
from tx.specs.named_resources import GENERIC as NAMED_RESOURCES  # noqa: F401
from tx.specs.named_resources import GiB  # noqa: F401
from tx.specs.api import Resource  # noqa: F401,E402
