"""``python -m tx_ray_driver``: the entrypoint of a tx app's Ray job."""
import sys

from ._app import main

if __name__ == "__main__":
    sys.exit(main())
