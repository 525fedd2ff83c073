"""CPU seconds and peak RSS of a 10,000-trial sweep dryrun (utils.python, a 100x100 grid),
as bench/RESULTS-sweeps.md reports them.

    python bench/sweep_dryrun_profile.py local_cwd|slurm|kubernetes|gcp_batch|aws_batch [profile] [--trials N]

slurm runs offline (fixed cluster facts: no Slurm needed), and so do the others (a dryrun
calls no backend); with a second argument, the cProfile of the dryrun is printed
(cumulative, top 45). ``--trials N`` (a multiple of 100; default 10,000): a (N/100)x100
grid. Prints one line on stderr: scheduler, CPU seconds of the dryrun and
its printing, peak RSS (MB), bytes printed, and the native request's size in bytes
(``request_bytes``: Slurm's script and table, LSF's scripts and table, the Kubernetes Job and its ConfigMap as JSON,
the GCP Batch job's protobuf, the AWS job definition and submit as JSON; or why there is
no native request).
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


def request_bytes(info: object) -> object:
    """The native request's size in bytes (see the module docstring), or why there is none."""
    import json

    native = getattr(info, "native", None)
    if native is None:
        return f"none: {getattr(info, 'not_native', '')}"
    req = native.request
    if hasattr(req, "trial_ids"):  # lsf: every array's script and the table file
        return sum(len(req.script(k)) for k in range(len(req.arrays))) + len(req.table_text())
    if hasattr(req, "table_text"):  # slurm: the script and the table file
        return len(req.materialize()) + len(req.table_text())
    if hasattr(req, "resource"):  # kubernetes: the Job and its table's ConfigMap
        return len(json.dumps(req.resource)) + (len(json.dumps(req.table)) if getattr(req, "table", None) else 0)
    if hasattr(req, "job_def"):  # aws_batch
        return len(json.dumps(req.job_def)) + len(json.dumps(req.submit))
    job = req.job  # gcp_batch
    return type(job).pb(job).ByteSize()


def main() -> None:
    os.environ.setdefault("TX_STATE_DIR", tempfile.mkdtemp())
    argv = sys.argv[1:]
    trials = 10_000
    if "--trials" in argv:
        at = argv.index("--trials")
        trials = int(argv[at + 1])
        del argv[at:at + 2]
    which = argv[0]
    spec = SweepSpec(grid={"lr": list(range(trials // 100)), "b": list(range(100))})
    args = ["-c", "print('${lr} ${b}')"]
    factories = None
    if which == "slurm":
        from tx_scheduler_slurm._cluster import ClusterInfo
        from tx_scheduler_slurm.scheduler import create_scheduler
        factories = {"slurm": lambda s, **kw: create_scheduler(s, cluster=ClusterInfo())}
    cfg = {"slurm": {"job_dir": tempfile.mkdtemp()}, "kubernetes": {"queue": "default"},
           "aws_batch": {"queue": "q"}}.get(which)
    os.environ.setdefault("GOOGLE_CLOUD_PROJECT", "offline-project")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    with Runner(scheduler_factories=factories) as r:
        t0 = time.process_time()
        prof = cProfile.Profile() if len(argv) > 1 else None
        if prof:
            prof.enable()
        try:
            info = r.dryrun_sweep("utils.python", spec, which, args, cfg=cfg)
            text = str(info)
            size = request_bytes(info)
        except ValueError as e:  # refused before anything is submitted
            text, size = "", f"refused: {e}"
        if prof:
            prof.disable()
        cpu = time.process_time() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(which, "trials", trials, "cpu", round(cpu, 2), "rss_mb", rss, "out_bytes", len(text), "request_bytes", size, file=sys.stderr)
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(45)


if __name__ == "__main__":
    main()
