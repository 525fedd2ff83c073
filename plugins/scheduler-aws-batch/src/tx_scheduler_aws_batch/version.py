"""Version of the tx-scheduler-aws-batch distribution."""

__version__ = "0.1.0"
