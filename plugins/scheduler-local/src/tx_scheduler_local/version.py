"""Version of the tx-scheduler-local distribution."""

__version__ = "0.1.0"
