"""``tx list`` of many apps on each remote backend: the backend calls and the wall time, to
show that they grow with the pages, not with the apps.

For aws_batch (a private moto_server, simple mode), gcp_batch (the tests' local Batch
server, no VMs: every job stays QUEUED) and kubernetes (the tests' fake API server, one
node: a few pods run ``sleep``, the rest pend): submits ``--apps`` apps one by one
(``Runner.run``, each ``sleep 600``), then a sweep of ``--apps`` trials (one array job, one
job of N tasks, one Indexed Job), and measures ``--repeat`` times what ``tx list`` does
in-process (``Runner.list`` and the sweep folding of ``tx.cli.cmd_sweep.collapse_sweeps``),
counting the backend calls (botocore's events; the Batch client's methods; the fake
server's request log), plus the wall time of the ``tx list -s SCHEDULER --all`` command.
The Slurm rows come from bench/sweep_torchx_bench.py (bench/.work/list-slurm-rows.md). Ray
(``--only ray``, ``--ray-apps``, default 100): a private head (scripts/start-ray.sh) and
short apps (``true``) run in waves of 10, listed after a fifth of them and after all, since
1,000 live Ray jobs are 1,000 driver processes, more than the shared 2-core machine holds;
its list is one ``list_jobs`` (GET /api/jobs/, unpaged) whatever the count.

Replaces the section "`tx list` of many apps on each remote backend" of
bench/RESULTS-sweeps.md.

    python bench/list_bench.py [--apps 1000] [--repeat 3] [--only aws_batch,gcp_batch,kubernetes,ray] [--ray-apps 100]
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from sweep_torchx_bench import LIST_SECTION, replace_section  # noqa: E402 - the sibling bench's section writer
from _common import calls_text, free_ports, spread  # noqa: E402 - the benches' shared helpers
from sweep_cloud_bench import count_batch_calls  # noqa: E402 - the sibling bench's call counter


BACKENDS = ("aws_batch", "gcp_batch", "kubernetes", "ray", "slurm")


def kept_rows(out: Path, measured: List[str]) -> "tuple[List[str], str]":
    """The table rows of the section in ``out`` for the backends not measured in this run
    (``--only``), and when that section was measured (its first line's date, "" if none)."""
    old = out.read_text() if out.exists() else ""
    if LIST_SECTION not in old:
        return [], ""
    sec = old.partition(LIST_SECTION)[2]
    sec = sec[:sec.find("\n## ")] if "\n## " in sec else sec
    before = re.search(r"kept from the run before \(([^)]*)\)", sec)  # rows kept already: their own run
    date = re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", sec)
    load = re.search(r"Load average \(1 min\) while measuring[^:]*: ([\d.]+-[\d.]+ on \d+ CPUs)", sec)
    when = before.group(1) if before else ", ".join(
        ([date.group(0)] if date else []) + ([f"load average {load.group(1)}"] if load else []))
    rows = [ln for ln in sec.splitlines() if ln.startswith("| ") and ln.split("|")[1].strip() in BACKENDS
            and ln.split("|")[1].strip() not in measured]
    return rows, when


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--apps", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="aws_batch,gcp_batch,kubernetes")
    ap.add_argument("--ray-apps", type=int, default=100,
                    help="apps on the private Ray head (--only ray): each is a Ray job with its own driver")
    ap.add_argument("--out", default=str(REPO / "bench" / "RESULTS-sweeps.md"))
    args = ap.parse_args()
    n, k = args.apps, args.repeat
    only = args.only.split(",")
    base = Path(tempfile.mkdtemp(prefix="tx-list-bench-"))
    os.environ["TX_STATE_DIR"] = str(base / "tx-state")
    tx_bin = shutil.which("tx")
    from tx.cli.cmd_sweep import collapse_sweeps
    from tx.runner import Runner
    from tx.specs import AppDef, Resource, Role
    from tx.specs.sweep import SweepSpec

    def app(image: str) -> AppDef:
        return AppDef("bench", [Role("w", image=image, entrypoint="sleep", args=["600"], env={"TRIAL": "${i}"},
                                     resource=Resource(cpu=1, gpu=0, memMB=64))])

    spec = SweepSpec(grid={"i": list(range(n))})
    rows: List[str] = []
    loads: List[float] = []

    def measure(runner: Any, scheduler: str, label: str, expect: Callable[[List[Any]], None],
                calls: Callable[[], List[str]], clear: Callable[[], None]) -> None:
        walls, seen, cli = [], set(), []
        for _ in range(k):
            clear()
            t = time.perf_counter()
            listed = collapse_sweeps(runner, scheduler, runner.list(scheduler))
            walls.append(time.perf_counter() - t)
            expect(listed)
            seen.add(calls_text(calls()))
            t = time.perf_counter()
            out = subprocess.run([tx_bin, "list", "-s", scheduler, "--all"], capture_output=True, text=True,
                                 timeout=600)
            cli.append(time.perf_counter() - t)
            got = [ln for ln in out.stdout.splitlines() if ln.startswith(f"{scheduler}://")]
            assert out.returncode == 0 and len(got) == len(listed), (out.returncode, len(got), len(listed),
                                                                      out.stderr[-800:])
        loads.append(os.getloadavg()[0])
        rows.append(f"| {scheduler} | {label} | {k} | {spread(walls)} | {spread(cli)} | {'; '.join(sorted(seen))} |")
        print(rows[-1], file=sys.stderr, flush=True)

    def apps_then_sweep(runner: Any, scheduler: str, cfg: Dict[str, Any], image: str, where: str,
                        calls: Callable[[], List[str]], clear: Callable[[], None], **sweep_kw: Any) -> None:
        t = time.perf_counter()
        for _ in range(n):
            runner.run(app(image), scheduler, cfg)
        print(f"{scheduler}: {n} apps submitted in {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)

        def apps_only(listed: List[Any]) -> None:
            assert len(listed) == n, len(listed)
        measure(runner, scheduler, f"{n} apps ({where})", apps_only, calls, clear)
        handle = runner.run_sweep(app(image), spec, scheduler, cfg=cfg, **sweep_kw)

        def with_sweep(listed: List[Any]) -> None:
            assert len(listed) == n + 1 and sum(a.app_handle == handle for a in listed) == 1, len(listed)
        measure(runner, scheduler, f"the same and a sweep of {n} trials (shown as one row)", with_sweep, calls, clear)

    if "aws_batch" in only:
        from tx_scheduler_aws_batch.testing import make_queue, start_moto

        endpoint, svc = start_moto(base / "moto.log")
        try:
            moto = make_queue(endpoint, svc, "bench")
            saved = dict(os.environ)
            os.environ.update(moto.env())
            with Runner() as runner:
                aws: List[str] = []
                runner.scheduler("aws_batch")._aws.batch.meta.events.register(
                    "before-call.batch.*", lambda model, **_: aws.append(model.name))
                apps_then_sweep(runner, "aws_batch", {"queue": moto.queue}, "busybox", "moto, simple mode",
                                lambda: list(aws), aws.clear)
            os.environ.clear()
            os.environ.update(saved)
        finally:
            svc.stop()
    if "gcp_batch" in only:
        sys.path.insert(0, str(REPO / "plugins" / "scheduler-gcp-batch" / "tests"))
        from fake_gcp import FakeGcp  # the tests' local Batch server

        (base / "gcp").mkdir()
        gcp = FakeGcp(str(base / "gcp")).start()
        saved = dict(os.environ)
        try:
            os.environ.update({"CLOUDSDK_API_ENDPOINT_OVERRIDES_BATCH": gcp.url + "/",
                               "CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING": gcp.url + "/",
                               "GOOGLE_CLOUD_PROJECT": "bench-project", "CLOUDSDK_BATCH_LOCATION": "us-central1",
                               "CLOUDSDK_CONFIG": str(base / "gcloud"), "NO_GCE_CHECK": "true"})
            with gcp.vms(0), Runner() as runner:
                gc = count_batch_calls(runner.scheduler("gcp_batch")._batch_client())
                apps_then_sweep(runner, "gcp_batch", {}, "busybox", "local Batch server, QUEUED",
                                lambda: list(gc), gc.clear, max_parallel=n)
        finally:
            os.environ.clear()
            os.environ.update(saved)
            gcp.stop()
    if "kubernetes" in only:
        import yaml

        tests = REPO / "plugins" / "scheduler-k8s" / "tests"
        sys.path.insert(0, str(tests))
        from tx_scheduler_k8s.testing import ADMIN_TOKEN, kubeconfig  # the tests' kubeconfig helper

        port = free_ports(1)
        log = base / "kube-server.log"
        with open(log, "wb") as out:
            server = subprocess.Popen(
                [sys.executable, str(tests / "fakekube" / "server.py"), "--port", str(port), "--workdir",
                 str(base / "kube"), "--schemas", str(tests / "data" / "schemas"), "--token",
                 f"admin={ADMIN_TOKEN}", "--nodes", "1", "--node-cpu", "4", "--node-memory", "8Gi"],
                stdout=out, stderr=out)
        saved = dict(os.environ)
        try:
            (base / "kubeconfig").write_text(yaml.safe_dump(kubeconfig(f"http://127.0.0.1:{port}")))
            os.environ["KUBECONFIG"] = str(base / "kubeconfig")
            deadline = time.monotonic() + 60
            while "PORT " not in log.read_text(errors="replace") and time.monotonic() < deadline:
                time.sleep(0.2)
            mark = [0]

            def kube_calls() -> List[str]:
                time.sleep(0.2)  # the server writes its request line after answering
                lines = log.read_text(errors="replace").splitlines()[mark[0]:]
                return [" ".join(ln.split()[1:3]).split("?")[0] for ln in lines if ln[:4].isdigit()]

            def kube_clear() -> None:
                mark[0] = len(log.read_text(errors="replace").splitlines())

            with Runner() as runner:
                apps_then_sweep(runner, "kubernetes", {"queue": "default"}, "busybox", "fake API server",
                                kube_calls, kube_clear, max_parallel=4)
        finally:
            os.environ.clear()
            os.environ.update(saved)
            server.terminate()
            server.wait(30)

    if "ray" in only:
        # A private head (scripts/start-ray.sh: its own temp dir and ports). Every Ray job
        # runs a driver process (and Ray's JobSupervisor actor) while it lives, so the apps
        # here end at once (`true`) and are submitted in waves that finish before the next:
        # the head's job table keeps them all, and that table is what `list` reads.
        import ray.dashboard.modules.job.sdk as ray_sdk

        dash = free_ports(2)
        gcs = dash + 1
        ray_env = {**os.environ, "RAY_BASE": str(base / "ray"), "RAY_DASHBOARD_PORT": str(dash),
                   "RAY_GCS_PORT": str(gcs), "RAY_NUM_CPUS": "2",
                   "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        subprocess.run(["bash", str(REPO / "scripts" / "start-ray.sh")], env=ray_env, check=True,
                       stdout=subprocess.DEVNULL, timeout=300)
        saved = dict(os.environ)
        listed_calls: List[str] = []
        real_list = ray_sdk.JobSubmissionClient.list_jobs

        def counted_list(self: Any, *a: Any, **kw: Any) -> Any:
            listed_calls.append("list_jobs (GET /api/jobs/)")
            return real_list(self, *a, **kw)

        try:
            os.environ["RAY_ADDRESS"] = f"http://127.0.0.1:{dash}"
            ray_sdk.JobSubmissionClient.list_jobs = counted_list  # type: ignore[method-assign]
            quick = AppDef("bench", [Role("w", image="", entrypoint="true", args=[],
                                          resource=Resource(cpu=1, gpu=0, memMB=64))])
            with Runner() as runner:
                t, done = time.perf_counter(), 0
                for wave in (max(1, args.ray_apps // 5), args.ray_apps - max(1, args.ray_apps // 5)):
                    for start in range(0, wave, 10):
                        handles = [runner.run(quick, "ray", {}) for _ in range(min(10, wave - start))]
                        for h in handles:
                            runner.wait(h, wait_interval=0.5, timeout=600)
                    done += wave
                    print(f"ray: {done} apps run in {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)

                    def all_listed(listed: List[Any], _n: int = done) -> None:
                        assert len(listed) == _n, (len(listed), _n)
                    measure(runner, "ray", f"{done} apps (private head, ended)", all_listed,
                            lambda: list(listed_calls), listed_calls.clear)
        finally:
            ray_sdk.JobSubmissionClient.list_jobs = real_list  # type: ignore[method-assign]
            os.environ.clear()
            os.environ.update(saved)
            subprocess.run(["bash", str(REPO / "scripts" / "stop-ray.sh")], env=ray_env, timeout=120,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    slurm = REPO / "bench" / ".work" / "list-slurm-rows.md"
    measured = [b for b in BACKENDS if b in only] + (["slurm"] if slurm.exists() else [])
    kept, kept_when = kept_rows(Path(args.out), measured)
    order = {b: i for i, b in enumerate(BACKENDS)}
    table = sorted(rows + (slurm.read_text().splitlines() if slurm.exists() else []) + kept,
                   key=lambda ln: order.get(ln.split("|")[1].strip(), len(order)))
    flags = "" if args.only == ap.get_default("only") else f" --only {args.only}"
    if "ray" in only:
        flags += f" --ray-apps {args.ray_apps}"
    ray_rows = [ln.split("|")[2].strip().split()[0] for ln in table if ln.split("|")[1].strip() == "ray"]
    text = [
        LIST_SECTION,
        "",
        f"`python bench/list_bench.py --apps {n} --repeat {k}{flags}` (and bench/sweep_torchx_bench.py for Slurm) on "
        f"{platform.node()} ({os.cpu_count()} CPUs, Python {platform.python_version()}), "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {n} apps submitted one by one (`Runner.run`, "
        f"`sleep 600`), listed; then a sweep of {n} trials beside them, listed again. `tx list` in-process is "
        "`Runner.list` and the folding of each sweep's trials into one row, as the command does; the command "
        "`tx list -s SCHEDULER --all` is a fresh process (its wall includes start-up and printing every row). "
        "Wall time median (min-max) over n runs."
        + (f" The rows of {', '.join(sorted({ln.split('|')[1].strip() for ln in kept}))} are kept from the run "
           f"before ({kept_when}), not measured again: compare rows of one run." if kept else ""),
        "",
        "| backend | listed | n | `tx list` in-process | `tx list --all` command | backend calls (each run) |",
        "| --- | --- | --- | --- | --- | --- |",
        *table,
        "",
        "- Calls grow with pages, not apps: AWS Batch lists each queue (`ListJobs`, up to 1,000 a page; moto "
        "answers in one) and reads the tags with one `DescribeJobs` per 100 jobs; a sweep's array job adds one "
        "`DescribeJobs` per 100 of its children (its trials' states, so the sweep's row has them). GCP Batch: "
        "one `list_jobs` (the local server answers up to 1,000 jobs a page), plus one `list_tasks` per sweep job. "
        "Kubernetes: label-selected lists (the apps' objects, their pods, the sweeps' Indexed Jobs), whatever "
        "the number of apps. Slurm: one squeue and one sacct. Ray: one `list_jobs` (GET /api/jobs/, the head's "
        "whole job table, unpaged), "
        + ("measured with fewer apps than the others: each Ray job runs a driver and Ray's JobSupervisor actor "
           "while it lives, so the bench runs short apps (`true`) in waves of 10 and lists them once ended; the "
           "table keeps them all." if ray_rows else "not measured in this run."),
        "- The servers here answer in milliseconds: the walls are mostly tx's own work (and the fake servers' "
        "Python), not AWS's, Google's or a real API server's latency.",
        "- gcp_batch's `list_jobs` asks for only the fields `list` reads (the `X-Goog-FieldMask` system "
        "parameter: each job's name, labels, state and runnable commands), 1,000 jobs a page, and a sweep's "
        "`list_tasks` only each task's name and state. Whole Job messages "
        "carry every task's environment (the stored AppDef, the run options: about 3 kB of JSON a job here), which "
        "the client library's REST transport parses in pure Python (`json_format`): in a cProfile of the list "
        "before, that parsing was two thirds of the time and the local server's rendering most of the rest.",
        f"- Load average (1 min) while measuring this run's rows: {min(loads or [0]):.1f}-{max(loads or [0]):.1f} on "
        f"{os.cpu_count()} CPUs (shared, heavily loaded by other work: walls vary up to 3x, see the ranges).",
        "",
        "| budget (issue 24) | measured | verdict |",
        "| --- | --- | --- |",
        "| `tx list` of 1,000 apps costs O(pages), not O(apps), on each remote backend | the calls above: "
        "none per app on slurm, aws_batch, gcp_batch, kubernetes; a sweep adds one call per 100 trials (AWS) "
        "or one per sweep job (GCP)" + ("; one `list_jobs` on ray, for " + " and for ".join(ray_rows) + " apps"
                                        if ray_rows else "") + f" | PASS{'' if ray_rows else ' (ray not measured)'} |",
        "",
    ]
    replace_section(Path(args.out), LIST_SECTION, text)
    print("\n".join(text))


if __name__ == "__main__":
    sys.exit(main())
