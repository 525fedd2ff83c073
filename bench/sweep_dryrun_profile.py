"""CPU seconds and peak RSS of a 10,000-trial sweep dryrun (utils.python, a 100x100 grid),
as bench/RESULTS-sweeps.md reports them.

    python bench/sweep_dryrun_profile.py local_cwd|slurm [profile]

slurm runs offline (fixed cluster facts: no Slurm needed); with a second argument, the
cProfile of the dryrun is printed (cumulative, top 45). Prints one line on stderr:
scheduler, CPU seconds of the dryrun and its printing, peak RSS (MB), bytes printed.
"""
import cProfile
import os
import pstats
import resource
import sys
import tempfile
import time

from tx.runner import Runner
from tx.specs.sweep import SweepSpec


def main() -> None:
    os.environ.setdefault("TX_STATE_DIR", tempfile.mkdtemp())
    which = sys.argv[1]
    spec = SweepSpec(grid={"lr": list(range(100)), "b": list(range(100))})
    args = ["-c", "print('${lr} ${b}')"]
    factories = None
    if which == "slurm":
        from tx_scheduler_slurm._cluster import ClusterInfo
        from tx_scheduler_slurm.scheduler import create_scheduler
        factories = {"slurm": lambda s, **kw: create_scheduler(s, cluster=ClusterInfo())}
    cfg = {"job_dir": tempfile.mkdtemp()} if which == "slurm" else None
    with Runner(scheduler_factories=factories) as r:
        t0 = time.process_time()
        prof = cProfile.Profile() if len(sys.argv) > 2 else None
        if prof:
            prof.enable()
        text = str(r.dryrun_sweep("utils.python", spec, which, args, cfg=cfg))
        if prof:
            prof.disable()
        cpu = time.process_time() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(which, "cpu", round(cpu, 2), "rss_mb", rss, "out_bytes", len(text), file=sys.stderr)
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(45)


if __name__ == "__main__":
    main()
