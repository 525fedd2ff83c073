"""``torchx.util.strings``: TorchX 0.7.0's ``normalize_str``."""
import re

__all__ = ["normalize_str"]


def normalize_str(data: str) -> str:
    """``data`` reduced to what names on most schedulers accept: lower case ASCII letters,
    digits and ``-``, with no leading ``-`` (``"-/_a/b/CD!123!"`` -> ``"abcd123"``); may be
    empty."""
    return re.sub(r"[^a-z0-9-]", "", data.lower()).lstrip("-")
