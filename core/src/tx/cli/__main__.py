import sys

from tx.cli.main import main

__all__ = []

sys.exit(main())
