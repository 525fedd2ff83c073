"""tx-scheduler-slurm: the ``slurm`` scheduler of tx.

Each app becomes one heterogeneous Slurm batch job (one component per replica of every
role) submitted with ``sbatch``; status comes from ``squeue`` and, for jobs Slurm no longer
keeps in memory, ``sacct`` or the jobcomp/filetxt file; logs are the per-replica files that
``srun`` writes. See :mod:`tx_scheduler_slurm.scheduler`.

Importing this package is cheap: the scheduler module is imported on first use.
"""
from tx_scheduler_slurm.version import __version__

__all__ = ["__version__"]
