"""tx-scheduler-lsf: the ``lsf`` scheduler of tx (IBM Spectrum LSF 10, and the subset of
LSF that OpenLava speaks).

Each replica of an app becomes one LSF batch job submitted with ``bsub``, all in one LSF
project named after the app id; status comes from ``bjobs``, logs from the ``-o``/``-e``
files, cancel is ``bkill``. See :mod:`tx_scheduler_lsf.scheduler`.

Importing this package is cheap: the scheduler module is imported on first use.
"""
from tx_scheduler_lsf.version import __version__

__all__ = ["__version__"]
