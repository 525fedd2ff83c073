"""Hook implementations of tx-scheduler-procs. Imports nothing heavy: tx loads this module
to learn what the plugin registers, and `tx --help` must stay fast."""
from tx import hookimpl


@hookimpl
def tx_register_schedulers(register):
    register(
        "procs",
        "tx_scheduler_procs.scheduler:create_scheduler",
        description="every replica as a detached local process (example plugin)",
        install="pip install tx-scheduler-procs",
    )
