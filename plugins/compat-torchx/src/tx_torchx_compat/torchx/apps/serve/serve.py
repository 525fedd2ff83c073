"""``torchx.apps.serve.serve``: :mod:`tx.apps.serve`, with TorchX 0.7.0's helper names
(``get_routable_ip_to``, ``rand_id``). ``main(argv)`` returns the exit status (0, or 1 after
one ``error: ...`` line on stderr) where TorchX's raised (``requests.HTTPError``, an
fsspec error) and returned None."""
import binascii
import getpass
import os

from tx.apps.serve import *  # noqa: F401,F403
from tx.apps.serve import __all__ as _tx_all
from tx.apps.serve import routable_ip

__all__ = [*_tx_all, "get_routable_ip_to", "rand_id"]


def get_routable_ip_to(addr: str) -> str:
    """TorchX's name of :func:`tx.apps.serve.routable_ip`: the local IP address used to
    reach the host of the URL ``addr``."""
    return routable_ip(addr)


def rand_id() -> str:
    """``USER_<16 hex digits>``, as TorchX names the served model file."""
    return f"{getpass.getuser()}_{binascii.b2a_hex(os.urandom(8)).decode('utf-8')}"


if __name__ == "__main__":  # python -m torchx.apps.serve.serve: what AppDefs built by TorchX run
    import sys

    from tx.apps.serve import main

    sys.exit(main())
