"""``torchx.cli.main``: TorchX 0.7's ``main(argv)``, running tx's CLI."""
import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> None:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``) as TorchX's ``main`` does:
    return None when the command succeeds, raise SystemExit with the exit code when it
    fails (TorchX's commands call ``sys.exit``).

    Raises:
        SystemExit: the command failed (code 1, or 2 for a usage error).
    """
    from tx.cli.main import main as tx_main

    rc = tx_main(list(sys.argv[1:] if argv is None else argv))
    if rc:
        raise SystemExit(rc)
