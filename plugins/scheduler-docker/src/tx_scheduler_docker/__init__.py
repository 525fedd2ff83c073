"""tx-scheduler-docker: the ``local_docker`` scheduler and the ``docker`` workspace kind."""
from tx_scheduler_docker.version import __version__

__all__ = ["__version__"]
