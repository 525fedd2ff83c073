"""Version of the tx-scheduler-gcp-batch distribution."""

__version__ = "0.1.0"
