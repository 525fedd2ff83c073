"""Version of the tx-scheduler-lsf distribution."""

__version__ = "0.1.0"
