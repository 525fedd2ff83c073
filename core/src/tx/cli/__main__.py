import sys

from tx.cli.main import main

sys.exit(main())
