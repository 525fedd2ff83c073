"""tx-scheduler-local: the ``local_cwd`` and ``local_dir`` schedulers.

Every replica is a local process; a small supervisor per app (a detached process) starts
them, relays their output into log files and records their states on disk, so apps outlive
the process that launched them. See :mod:`tx_scheduler_local.scheduler` and README.md.

This package's ``__init__`` imports nothing: the supervisor (``python -m
tx_scheduler_local._supervisor``) must start fast.
"""
