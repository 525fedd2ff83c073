"""Version of the tx-scheduler-k8s distribution."""

__version__ = "0.1.0"
