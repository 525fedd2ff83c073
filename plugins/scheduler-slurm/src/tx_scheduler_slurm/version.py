"""Version of the tx-scheduler-slurm distribution."""

__version__ = "0.1.0"
