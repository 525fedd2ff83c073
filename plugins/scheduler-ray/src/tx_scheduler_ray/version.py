"""Version of the tx-scheduler-ray distribution."""

__version__ = "0.1.0"
